#!/usr/bin/env bash
# bench/cpu_peers.sh — gpt2.cuh's CPU backend beside the programs a user without a GPU would run instead, on this
# machine, on one GPT-2 124M-shape model with random weights (bench/make_random_model.py, float32), all threads:
#   gpt2.cuh CPU      bench/bench_cpu built with the Makefile's flags (F32, F16 and BF16: weights and KV cache in
#                     the dtype, converted at load; arithmetic float32), and F32 again with -march=native
#   transformers      Hugging Face transformers on torch (CPU), float32 and bfloat16 (bench/cpu_peer_hf.py)
#   llama.cpp         built from the source PyPI's llama-cpp-python source distribution ships, the model converted
#                     with its convert_hf_to_gguf.py: f32 weights (f16 KV cache, its default) and f16 weights;
#                     timed by its llama-bench (its own figures), --repack 0 (its AMX q8_0 path crashed on prompts)
# Workloads, each system's in processes of their own (the process's peak RSS, /usr/bin/time, is the workload's):
#   decode   batch 1, a prompt of 128 then 128 greedy tokens (EOS ignored, no speculation): ms per token
#            (llama-bench: -n 128 at a depth of 128; it decodes without sampling)
#   prompt   one prompt of 256: tokens/s to its first token (llama-bench: -p 256)
# REPS runs each (default 5) after an untimed one; the table gives min–max. Before each workload it waits (every
# 20 s, at most 15 minutes in all) for the 1-minute load average to fall below 1.5 and the cores to be under 10%
# busy over 2 s (on 2 cores one other job at full speed halves a timing), and notes the load it started at.
# Installs what is missing (pip: torch transformers safetensors numpy; apt-get: cmake) and keeps the downloads,
# the llama.cpp build, the model and its GGUF files under CACHE (default ~/.cache/gpt2cuh-peers): a second run
# skips what is there. Builds and installs run under nice -n 19. Writes the table to $OUT/cpu_peers.md (OUT
# default bench/out) and the logs under $OUT/cpu_peers/.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out}
cache=${CACHE:-$HOME/.cache/gpt2cuh-peers}
reps=${REPS:-5}
logs=$out/cpu_peers
mkdir -p "$out" "$logs" "$cache"
: > "$logs/steps.log"
NICE="nice -n 19"
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
step_t0=$(date +%s)
step() { local t=$(date +%s); echo "[$(date -u +%H:%M:%S)] ($((t - step_t0)) s) $*" | tee -a "$logs/steps.log"; step_t0=$t; }
die() { echo "cpu_peers: $*" >&2; exit 1; }

# ---- what it needs
python3 -c "import torch, transformers, safetensors, numpy" 2>/dev/null ||
    $NICE python3 -m pip install torch transformers safetensors numpy || die "pip install failed"
need_apt=
command -v cmake > /dev/null || need_apt="$need_apt cmake"
[ -x /usr/bin/time ] || need_apt="$need_apt time"
command -v c++ > /dev/null || need_apt="$need_apt g++"
if [ -n "$need_apt" ]; then
    $SUDO $NICE apt-get update -qq && $SUDO $NICE apt-get install -y -qq $need_apt > /dev/null || die "apt-get install$need_apt failed"
fi
step "python packages and tools present"

# ---- llama.cpp from llama-cpp-python's source distribution
src=$(ls -d "$cache"/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | sort -V | tail -1)
if [ -z "$src" ]; then
    $NICE python3 -m pip download --no-binary :all: --no-deps llama-cpp-python -d "$cache" > "$logs/pip_download.log" 2>&1 ||
        { tail -5 "$logs/pip_download.log"; die "pip download llama-cpp-python failed"; }
    sdist=$(ls "$cache"/llama_cpp_python-*.tar.gz | sort -V | tail -1)
    $NICE tar xzf "$sdist" -C "$cache" || die "cannot unpack $sdist"
    src=$(ls -d "$cache"/llama_cpp_python-*/vendor/llama.cpp | sort -V | tail -1)
fi
lcp_version=$(basename "$(dirname "$(dirname "$src")")" | sed 's/llama_cpp_python-//')
lbuild=$cache/llama-build-$lcp_version
if [ ! -x "$lbuild/bin/llama-bench" ]; then
    # GGML_NATIVE (the default): built for this CPU, as a user building it here gets
    $NICE cmake -S "$src" -B "$lbuild" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF > "$logs/llama_cmake.log" 2>&1 &&
        $NICE cmake --build "$lbuild" --target llama-bench -j "$(nproc)" > "$logs/llama_build.log" 2>&1 ||
        { tail -20 "$logs/llama_cmake.log" "$logs/llama_build.log"; die "building llama.cpp failed"; }
fi
step "llama.cpp $lcp_version built ($lbuild/bin/llama-bench)"

# ---- the model: float32 safetensors + config.json with the two keys of a published GPT-2 config that the converter
# needs (architectures, n_ctx) + GPT-2's tokenizer files (the converter writes the vocabulary into the GGUF)
model=$cache/model-124M
if [ ! -f "$model/model.safetensors" ]; then
    $NICE python3 bench/make_random_model.py 124M "$model" f32 || die "bench/make_random_model.py failed"
fi
python3 - "$model/config.json" << 'EOF' || die "cannot edit $model/config.json"
import json, sys
c = json.load(open(sys.argv[1]))
c.setdefault("architectures", ["GPT2LMHeadModel"]); c.setdefault("n_ctx", c["n_positions"])
json.dump(c, open(sys.argv[1], "w"))
EOF
for f in vocab.json merges.txt; do
    [ -f "$model/$f" ] || cp "weights/$f" "$model/" || die "cannot copy weights/$f"
done
for t in f32 f16; do
    [ -f "$cache/model-124M-$t.gguf" ] && continue
    PYTHONPATH="$src/gguf-py" $NICE python3 "$src/convert_hf_to_gguf.py" "$model" --outtype $t \
        --outfile "$cache/model-124M-$t.gguf.part" > "$logs/convert_$t.log" 2>&1 ||
        { tail -20 "$logs/convert_$t.log"; die "convert_hf_to_gguf.py --outtype $t failed"; }
    mv "$cache/model-124M-$t.gguf.part" "$cache/model-124M-$t.gguf"
done
step "model and GGUF files ready ($model)"

# ---- gpt2.cuh: bench_cpu with the Makefile's command, and the same with -march=native
cmd=$(make -s -B -n bench/bench_cpu | grep -- '-o bench/bench_cpu') || die "make -n bench/bench_cpu printed no command"
$NICE ${cmd/-o bench\/bench_cpu/-o $cache/bench_cpu} || die "building bench_cpu failed"
$NICE ${cmd/-o bench\/bench_cpu/-march=native -o $cache/bench_cpu_native} || die "building bench_cpu -march=native failed"
step "bench_cpu built: $cmd (and with -march=native)"

# ---- a quiet machine: before each workload, wait (every 20 s) until the 1-minute load average is below 1.5 and the
# cores are under 10% busy over 2 s (/proc/stat); the waits together last at most 15 minutes, after which the rest
# run as they come (the table gives each one's load)
load1() { cut -d' ' -f1 /proc/loadavg; }
busy() { # percent of the cores' time busy over the next 2 s
    local a b
    a=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat); sleep 2
    b=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    echo "$a $b" | awk '{ u = $3 - $1; i = $4 - $2; printf "%.0f", (u + i > 0 ? 100 * u / (u + i) : 0) }'
}
wait_left=900
wait_quiet() {
    local b
    while b=$(busy); [ "$wait_left" -gt 0 ] && ! awk -v l="$(load1)" -v b="$b" 'BEGIN { exit !(l < 1.5 && b < 10) }'; do
        echo "load average $(load1), $b% busy, waiting" >> "$logs/steps.log"
        sleep 20
        wait_left=$((wait_left - 20))
    done
    [ "$wait_left" -gt 0 ] || echo "load average $(load1) and the 15 minutes of waiting spent: timing anyway" >> "$logs/steps.log"
}
wait_quiet
step "load average $(load1): timing"

# ---- the workloads; results.tsv: system, workload, the runs' figures (comma separated), peak RSS kB, load average
: > "$logs/results.tsv"
# measure NAME WORKLOAD KIND COMMAND...: runs COMMAND under /usr/bin/time (stdout to .log, stderr to .err); KIND
# llama: the stdout is llama-bench's JSON (tokens/s of each run); else lines "decode_ms_per_token X" or
# "prompt_tokens_per_s X"
measure() {
    local name=$1 w=$2 kind=$3; shift 3
    local f="$logs/$(echo "$name" | tr -c 'A-Za-z0-9\n' '_')_$w" l vals rss
    wait_quiet
    l=$(load1)
    timeout 900 /usr/bin/time -v -o "$f.time" "$@" > "$f.log" 2> "$f.err" ||
        { echo "cpu_peers: $name, $w failed (see $f.err)"; tail -5 "$f.err"; }
    rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$f.time" 2> /dev/null)
    if [ "$kind" = llama ]; then
        vals=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(",".join("%.3f" % (1e3 / t if sys.argv[2] == "decode" else t) for t in r[0]["samples_ts"]))' "$f.log" "$w" 2> /dev/null)
    else
        vals=$(awk '/^(decode_ms_per_token|prompt_tokens_per_s) / { printf "%s%s", s, $2; s = "," }' "$f.log")
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$w" "${vals:--}" "${rss:--}" "$l" | tee -a "$logs/results.tsv"
}
nt=$(nproc)
for w in decode prompt; do
    measure "gpt2.cuh CPU F32 (Makefile flags)" $w own "$cache/bench_cpu" 124M "$model" "$reps" $w
    measure "gpt2.cuh CPU F32, -march=native" $w own "$cache/bench_cpu_native" 124M "$model" "$reps" $w
    measure "gpt2.cuh CPU F16 (Makefile flags)" $w own "$cache/bench_cpu" 124M "$model" "$reps" $w f16
    measure "gpt2.cuh CPU BF16 (Makefile flags)" $w own "$cache/bench_cpu" 124M "$model" "$reps" $w bf16
    measure "Hugging Face transformers, torch f32" $w own python3 bench/cpu_peer_hf.py "$model" $w f32 "$reps"
    measure "Hugging Face transformers, torch bf16" $w own python3 bench/cpu_peer_hf.py "$model" $w bf16 "$reps"
    if [ $w = decode ]; then lw="-p 0 -n 128 -d 128"; else lw="-p 256 -n 0"; fi
    for t in f32 f16; do
        measure "llama.cpp $t weights, f16 KV cache" $w llama "$lbuild/bin/llama-bench" -m "$cache/model-124M-$t.gguf" \
            -t "$nt" $lw -r "$reps" --repack 0 -ctk f16 -ctv f16 -o json
    done
done
step "timed"

# ---- the table
commit=$(git rev-parse --short HEAD 2> /dev/null || echo unknown)
git diff --quiet HEAD -- gpt2.cuh bench/bench_cpu.c 2> /dev/null || commit="$commit (with local changes to gpt2.cuh or bench/bench_cpu.c)"
cpu=$(lscpu | awk -F': *' '/^Model name/ { print $2; exit }')
versions=$(python3 -c 'import torch, transformers; print("torch %s, transformers %s" % (torch.__version__, transformers.__version__))')
llama_info=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))[0]; print(r.get("build_commit"), r.get("flash_attn"))' \
    "$logs/llama_cpp_f32_weights__f16_KV_cache_decode.log" 2> /dev/null)
python3 - "$logs/results.tsv" "$(date -u +'%Y-%m-%d %H:%M UTC')" "$cpu" "$(nproc)" "$commit" "$versions" \
    "$lcp_version" "${llama_info:-? ?}" "$reps" > "$out/cpu_peers.md" << 'EOF'
import sys
tsv, date, cpu, cores, commit, versions, lcp, llama_info, reps = sys.argv[1:]
build, fa = llama_info.split()
fa = {"-1": "auto", "0": "off", "1": "on"}.get(fa, fa)
rows = {}
for line in open(tsv):
    name, w, vals, rss, load = line.rstrip("\n").split("\t")
    rows.setdefault(name, {})[w] = (vals, rss, float(load))
def span(vals, fmt):
    if vals == "-": return "failed"
    v = [float(x) for x in vals.split(",")]
    return fmt.format(min(v)) + "–" + fmt.format(max(v))
mb = lambda rss: "-" if rss == "-" else "%.0f" % (int(rss) / 1024)
loads = [r[2] for d in rows.values() for r in d.values()]
print(f"{cores} cores of an {cpu}, {date}, gpt2.cuh at {commit}; GPT-2 124M shape with random weights "
      f"(bench/make_random_model.py, float32), batch 1, every core; {reps} runs each after an untimed one (min–max); "
      f"the 1-minute load average was {min(loads):.2f}–{max(loads):.2f} as the workloads started. {versions}; "
      f"llama.cpp as llama-cpp-python {lcp}'s source distribution ships it (build {build}, GGML_NATIVE, timed by its "
      f"llama-bench, flash attention {fa}). Measured by `bash bench/cpu_peers.sh`.\n")
print("| system | decode ms/token | prompt 256, tokens/s | peak RSS MB, decode / prompt |")
print("| --- | --- | --- | --- |")
for name, d in rows.items():
    dec, pr = d.get("decode", ("-", "-", 0)), d.get("prompt", ("-", "-", 0))
    print(f"| {name} | {span(dec[0], '{:.1f}')} | {span(pr[0], '{:,.0f}')} | {mb(dec[1])} / {mb(pr[1])} |")
EOF
cat "$out/cpu_peers.md"
step "table written to $out/cpu_peers.md"
