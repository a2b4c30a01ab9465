#!/usr/bin/env bash
# weights/download.sh NAME... — fetch official GPT-2 checkpoints from Hugging Face into weights/NAME/,
# exactly as published (config.json, model.safetensors, vocab.json, merges.txt; no conversion).
#
#   NAME: gpt2 (124M, 548 MB)  gpt2-medium (355M, 1.52 GB)  gpt2-large (774M, 3.25 GB)
#         gpt2-xl (1558M, 6.43 GB)  distilgpt2 (82M, 353 MB)
#
# Every file is checked against the checksum the Hub lists for it (the tree API: sha256 for large
# files, the git blob id for small ones); a mismatch deletes the file and fails. Needs curl, python3
# and sha256sum. Re-running skips files that are already present and verified.
set -euo pipefail
cd "$(dirname "$0")"
HUB=${GPT2_HUB:-https://huggingface.co}
[ $# -ge 1 ] || { sed -n '2,9p' "$0"; exit 2; }

repo_of() {
    case "$1" in
        gpt2|gpt2-medium|gpt2-large|gpt2-xl) echo "openai-community/$1" ;;
        distilgpt2) echo "distilbert/distilgpt2" ;;
        *) echo "unknown model '$1' (expected gpt2, gpt2-medium, gpt2-large, gpt2-xl or distilgpt2)" >&2; return 1 ;;
    esac
}

# prints "sha256 HEX" or "gitblob HEX" for FILE in the repo's listing (read from stdin)
expected_sum() {
    python3 -c '
import json, sys
name = sys.argv[1]
for e in json.load(sys.stdin):
    if e.get("path") == name:
        if e.get("lfs"): print("sha256", e["lfs"]["oid"])
        else: print("gitblob", e["oid"])
        sys.exit(0)
sys.exit("not listed: " + name)' "$1"
}

actual_sum() { # KIND FILE
    if [ "$1" = sha256 ]; then sha256sum "$2" | cut -d" " -f1
    else # git's blob id: sha1 of "blob <size>\0" + content
        { printf 'blob %s\0' "$(stat -c %s "$2")"; cat "$2"; } | sha1sum | cut -d" " -f1
    fi
}

for name in "$@"; do
    repo=$(repo_of "$name")
    mkdir -p "$name"
    listing=$(curl -fsSL "$HUB/api/models/$repo/tree/main") || { echo "$name: cannot list $HUB/$repo" >&2; exit 1; }
    for f in config.json vocab.json merges.txt model.safetensors; do
        read -r kind want < <(printf '%s' "$listing" | expected_sum "$f")
        if [ -f "$name/$f" ] && [ "$(actual_sum "$kind" "$name/$f")" = "$want" ]; then
            echo "$name/$f: present, $kind ok"; continue
        fi
        echo "$name/$f: downloading"
        curl -fL --retry 3 -o "$name/$f.part" "$HUB/$repo/resolve/main/$f"
        got=$(actual_sum "$kind" "$name/$f.part")
        if [ "$got" != "$want" ]; then
            rm -f "$name/$f.part"
            echo "$name/$f: $kind mismatch (got $got, the Hub lists $want)" >&2; exit 1
        fi
        mv "$name/$f.part" "$name/$f"
        echo "$name/$f: $kind ok"
    done
done
echo "done: ./demo -m weights/$1 \"Hello\""
