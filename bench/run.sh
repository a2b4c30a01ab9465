#!/usr/bin/env bash
# bench/run.sh [SIZE...] — gpt2.cuh and both peers (careful PyTorch: bench/torch_peer.py; HF
# transformers: bench/hf_peer.py) on the standard workloads (bench/bench_gpt2.cu says what they are), in one device call on one GPU,
# printed side by side with the ratios (bench/compare.py). Default sizes: 124M 1558M, F16; the scoring workload also in
# BF16 and F32, for gpt2.cuh and both peers.
# WORKLOADS="latency throughput prefill score" (the default: all): the workloads to run (WORKLOADS=score: the scoring
# rows alone, without the one-process run and the mixed workload). SCORE_DTYPES="f16 bf16 f32" (the default): the
# scoring workload's dtypes. EXTRA_SIZES="355M 774M": those sizes too, for gpt2.cuh alone (the same workloads and
# scoring dtypes; the peers run only the SIZEs). ALL=1 also runs bench_gpt2 on every shape in F16, BF16 and F32. Logs
# go to $OUT (or bench/out); PACK=1 leaves there only table.md and logs.tgz (the device tool brings back at most 8
# files: a run's logs were lost so once).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out}
mkdir -p "$out"
sizes=${*:-124M 1558M}
workloads=${WORKLOADS:-latency throughput prefill score}
score_dtypes=${SCORE_DTYPES:-f16 bf16 f32}
extra=${EXTRA_SIZES:-}
has() { case " $1 " in *" $2 "*) return 0;; esac; return 1; }
date -u +"%Y-%m-%d %H:%M UTC" | tee "$out/date.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
make -j3 bench CUDA_ARCH="-gencode arch=compute_90a,code=sm_90a" > "$out/build_bench.log" 2>&1 || { tail -30 "$out/build_bench.log"; exit 1; }
# each workload in a process of its own, as a program that loads one model runs it; then all of them in one process,
# each model made after the ones before were freed, which on the H100 decodes ~1.2% slower for a cause not found:
# compare.py prints both. The scoring workload's other dtypes: one process a dtype over all the sizes.
per_process() { # LOG SIZE...: each size's workloads (F16) in processes of their own, then the other scoring dtypes
    local log=$1; shift
    for s in "$@"; do
        for w in $workloads; do
            if [ "$w" = score ] && ! has "$score_dtypes" f16; then continue; fi
            timeout 150 bench/bench_gpt2 $s --only $w 2>&1 | tee -a "$out/$log"
        done
    done
    if has "$workloads" score; then
        for dt in $score_dtypes; do
            [ "$dt" = f16 ] || timeout 150 bench/bench_gpt2 "$@" --dtype $dt --only score 2>&1 | tee -a "$out/${log%.txt}_score.txt"
        done
    fi
}
: > "$out/gpt2cuh.txt"; : > "$out/gpt2cuh_score.txt"
per_process gpt2cuh.txt $sizes
if [ -n "$extra" ]; then : > "$out/gpt2cuh_extra.txt"; : > "$out/gpt2cuh_extra_score.txt"; per_process gpt2cuh_extra.txt $extra; fi
all_workloads=1
for w in latency throughput prefill score; do has "$workloads" $w || all_workloads=0; done
[ $all_workloads = 1 ] && timeout 200 bench/bench_gpt2 $sizes 2>&1 | tee "$out/gpt2cuh_one_process.txt"
if [ "${ALL:-0}" = 1 ]; then
    for dt in f16 bf16 f32; do bench/bench_gpt2 124M 355M 774M 1558M --dtype $dt 2>&1 | tee -a "$out/gpt2cuh_all.txt"; done
fi
export PYTHONUNBUFFERED=1
OUT="$out" timeout 240 python3 bench/torch_peer.py $sizes --workloads "${workloads// /,}" --score-dtypes "${score_dtypes// /,}" \
    > "$out/torch_peer.log" 2>&1 || tail -5 "$out/torch_peer.log"
hf_plan=table; [ "$workloads" = score ] && hf_plan=score
score_sizes=""; has "$workloads" score && score_sizes=$sizes
OUT="$out" SCORE_SIZES="$score_sizes" SCORE_DTYPES="$score_dtypes" timeout 300 python3 bench/hf_peer.py $hf_plan \
    > "$out/hf_peer.log" 2>&1 || tail -5 "$out/hf_peer.log"
if [ $all_workloads = 1 ]; then
    python3 bench/make_random_model.py 124M /tmp/m124M > /dev/null && timeout 120 bench/bench_mixed /tmp/m124M 4096 256 cuda f16 2>&1 | tee "$out/mixed.txt"
fi
python3 bench/compare.py "$out" | tee "$out/table.md"
if [ "${PACK:-0}" = 1 ]; then
    tar czf /tmp/bench_logs.tgz -C "$out" --exclude=table.md . &&
        find "$out" -mindepth 1 -maxdepth 1 ! -name table.md -exec rm -rf {} + && mv /tmp/bench_logs.tgz "$out/logs.tgz"
fi
