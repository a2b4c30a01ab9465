#!/usr/bin/env bash
# weights/download.sh NAME... — fetch GPT-2-architecture checkpoints from Hugging Face into weights/NAME/,
# exactly as published (no conversion).
#
#   NAME: gpt2 (124M, 548 MB)  gpt2-medium (355M, 1.52 GB)  gpt2-large (774M, 3.25 GB)
#         gpt2-xl (1558M, 6.43 GB)  distilgpt2 (82M, 353 MB)
#         or any Hub repository OWNER/NAME of the GPT-2 architecture (into weights/OWNER/NAME/)
#   GPT2_REVISION=BRANCH picks a branch or commit of an OWNER/NAME repository (default main).
#
# Fetches the files the repository has of: config.json; model.safetensors, or its shards with
# model.safetensors.index.json, or else pytorch_model.bin, or its shards with pytorch_model.bin.index.json;
# vocab.json + merges.txt, or tokenizer.json; generation_config.json, added_tokens.json,
# special_tokens_map.json, tokenizer_config.json. Shards are those the index names. Every file is checked
# against the checksum the Hub lists for it (the tree API: sha256 for large files, the git blob id for
# small ones); a mismatch deletes the file and fails. Needs curl, python3 and sha256sum. Re-running skips
# files that are already present and verified.
set -euo pipefail
cd "$(dirname "$0")"
HUB=${GPT2_HUB:-https://huggingface.co}
[ $# -ge 1 ] || { sed -n '2,16p' "$0"; exit 2; }

# prints "REPO DIR REVISION": the Hub repository, the folder under weights/, the branch
repo_of() {
    case "$1" in
        gpt2|gpt2-medium|gpt2-large|gpt2-xl) echo "openai-community/$1 $1 main" ;;
        distilgpt2) echo "distilbert/distilgpt2 $1 main" ;;
        */*)
            # OWNER/NAME: letters, digits, '-', '_', '.'; no '..', no leading '.' or '-' (the name is a path here)
            if [[ ! "$1" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || [[ "$1" == *..* ]]; then
                echo "'$1' is not a Hub repository name (expected OWNER/NAME)" >&2; return 1
            fi
            echo "$1 $1 ${GPT2_REVISION:-main}" ;;
        *) echo "unknown model '$1' (expected gpt2, gpt2-medium, gpt2-large, gpt2-xl, distilgpt2 or OWNER/NAME)" >&2; return 1 ;;
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

# the file names the repository's top level holds, one a line (listing on stdin)
listed_files() {
    python3 -c '
import json, sys
for e in json.load(sys.stdin):
    if e.get("type") == "file": print(e["path"])'
}

# the shard files an index names (weight_map values), one a line; refuses names that are not plain
# file names in the repository's top level
index_shards() {
    python3 -c '
import json, re, sys
names = sorted(set(json.load(open(sys.argv[1]))["weight_map"].values()))
for n in names:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", n) or ".." in n:
        sys.exit("%s names the shard %r, not a plain file name" % (sys.argv[1], n))
    print(n)' "$1"
}

actual_sum() { # KIND FILE
    if [ "$1" = sha256 ]; then sha256sum "$2" | cut -d" " -f1
    else # git's blob id: sha1 of "blob <size>\0" + content
        { printf 'blob %s\0' "$(stat -c %s "$2")"; cat "$2"; } | sha1sum | cut -d" " -f1
    fi
}

fetch() { # DIR FILE: download FILE of $repo at $rev into DIR, verified against $listing
    local dir=$1 f=$2 kind want got
    read -r kind want < <(printf '%s' "$listing" | expected_sum "$f")
    if [ -f "$dir/$f" ] && [ "$(actual_sum "$kind" "$dir/$f")" = "$want" ]; then
        echo "$dir/$f: present, $kind ok"; return 0
    fi
    echo "$dir/$f: downloading"
    curl -fL --retry 3 -o "$dir/$f.part" "$HUB/$repo/resolve/$rev/$f"
    got=$(actual_sum "$kind" "$dir/$f.part")
    if [ "$got" != "$want" ]; then
        rm -f "$dir/$f.part"
        echo "$dir/$f: $kind mismatch (got $got, the Hub lists $want)" >&2; exit 1
    fi
    mv "$dir/$f.part" "$dir/$f"
    echo "$dir/$f: $kind ok"
}

first=
for name in "$@"; do
    read -r repo dir rev < <(repo_of "$name") || exit 1
    [ -n "$repo" ] || exit 1
    first=${first:-$dir}
    mkdir -p "$dir"
    listing=$(curl -fsSL "$HUB/api/models/$repo/tree/$rev") || { echo "$name: cannot list $HUB/$repo at $rev" >&2; exit 1; }
    files=$(printf '%s' "$listing" | listed_files)
    has() { printf '%s\n' "$files" | grep -qxF "$1"; }

    has config.json || { echo "$name: $repo has no config.json" >&2; exit 1; }
    fetch "$dir" config.json
    # the weights: one format, the one the loader prefers (safetensors, then PyTorch's)
    if has model.safetensors; then
        fetch "$dir" model.safetensors
    elif has model.safetensors.index.json; then
        fetch "$dir" model.safetensors.index.json
        for s in $(index_shards "$dir/model.safetensors.index.json"); do fetch "$dir" "$s"; done
    elif has pytorch_model.bin; then
        fetch "$dir" pytorch_model.bin
    elif has pytorch_model.bin.index.json; then
        fetch "$dir" pytorch_model.bin.index.json
        for s in $(index_shards "$dir/pytorch_model.bin.index.json"); do fetch "$dir" "$s"; done
    else
        echo "$name: $repo has none of model.safetensors, model.safetensors.index.json, pytorch_model.bin," \
             "pytorch_model.bin.index.json (only TensorFlow or Flax weights?)" >&2; exit 1
    fi
    # the tokenizer: vocab.json + merges.txt where both exist, else tokenizer.json
    if has vocab.json && has merges.txt; then
        fetch "$dir" vocab.json; fetch "$dir" merges.txt
    elif has tokenizer.json; then
        fetch "$dir" tokenizer.json
    else
        echo "$name: $repo has no tokenizer (vocab.json + merges.txt or tokenizer.json); the model loads, gpt2_tokenizer_load will not" >&2
    fi
    for f in generation_config.json added_tokens.json special_tokens_map.json tokenizer_config.json; do
        if has "$f"; then fetch "$dir" "$f"; fi
    done
done
echo "done: ./demo -m weights/$first \"Hello\""
