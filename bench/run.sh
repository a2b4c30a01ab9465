#!/usr/bin/env bash
# bench/run.sh [SIZE...] — gpt2.cuh and both peers (careful PyTorch: bench/torch_peer.py; HF
# transformers: bench/hf_peer.py) on the standard workloads (bench/bench_gpt2.cu says what they are), in one device call on one GPU,
# printed side by side with the ratios (bench/compare.py). Default sizes: 124M 1558M, F16.
# ALL=1 also runs bench_gpt2 on every shape in F16, BF16 and F32. Logs go to $OUT (or bench/out); PACK=1 leaves
# there only table.md and logs.tgz (the device tool brings back at most 8 files: a run's logs were lost so once).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out}
mkdir -p "$out"
sizes=${*:-124M 1558M}
date -u +"%Y-%m-%d %H:%M UTC" | tee "$out/date.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
make bench CUDA_ARCH="-gencode arch=compute_90a,code=sm_90a" > "$out/build_bench.log" 2>&1 || { tail -30 "$out/build_bench.log"; exit 1; }
# each workload in a process of its own, as a program that loads one model runs it; then all of them in one process,
# each model made after the ones before were freed, which on the H100 decodes ~1.2% slower for a cause not found:
# compare.py prints both
: > "$out/gpt2cuh.txt"
for s in $sizes; do
    for w in latency throughput prefill; do timeout 150 bench/bench_gpt2 $s --only $w 2>&1 | tee -a "$out/gpt2cuh.txt"; done
done
timeout 150 bench/bench_gpt2 $sizes 2>&1 | tee "$out/gpt2cuh_one_process.txt"
if [ "${ALL:-0}" = 1 ]; then
    for dt in f16 bf16 f32; do bench/bench_gpt2 124M 355M 774M 1558M --dtype $dt 2>&1 | tee -a "$out/gpt2cuh_all.txt"; done
fi
export PYTHONUNBUFFERED=1
OUT="$out" timeout 180 python3 bench/torch_peer.py $sizes > "$out/torch_peer.log" 2>&1 || tail -5 "$out/torch_peer.log"
OUT="$out" timeout 200 python3 bench/hf_peer.py table > "$out/hf_peer.log" 2>&1 || tail -5 "$out/hf_peer.log"
python3 bench/make_random_model.py 124M /tmp/m124M > /dev/null && timeout 120 bench/bench_mixed /tmp/m124M 4096 256 cuda f16 2>&1 | tee "$out/mixed.txt"
python3 bench/compare.py "$out" | tee "$out/table.md"
if [ "${PACK:-0}" = 1 ]; then
    tar czf /tmp/bench_logs.tgz -C "$out" --exclude=table.md . &&
        find "$out" -mindepth 1 -maxdepth 1 ! -name table.md -exec rm -rf {} + && mv /tmp/bench_logs.tgz "$out/logs.tgz"
fi
