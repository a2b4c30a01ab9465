#!/usr/bin/env bash
# bench/profile.sh [SIZE...] — where each standard workload's step spends its time, kernel by kernel (issue 5's
# "show the profile"). For each size (default 124M 1558M, F16; DTYPE=bf16|f32 for another dtype) it profiles with Nsight Compute one step of each
# kind that bench_gpt2 --breakdown builds: the throughput batch's decode step (1024 rows; 256 at 1558M; position
# 160), a batch-1 decode step (position 192) and, for 124M, the prefill benchmark's 16 x 1024 step and the scoring
# workload's logits product and reductions (its breakdown line splits the scoring call). ncu replays
# each kernel alone at the GPU's own clocks (--clock-control none) after flushing the caches (its default), so
# kernels neither overlap as they do in the step (programmatic dependent launch, parts) nor find their inputs in
# L2: the kernel times add up to more than the step's own time, which the breakdown lines printed first give
# (measured without the profiler). bench/profile_summary.py groups the kernels by family: count, time, DRAM bytes
# and rate, SM and tensor-pipe activity. Writes $OUT/profile.txt and $OUT/profile_raw.tar.gz ($OUT: bench/out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out}
mkdir -p "$out"
sizes=${*:-124M 1558M}
dt=${DTYPE:-f16} # DTYPE=bf16|f32: that dtype instead
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
date -u +"%Y-%m-%d %H:%M UTC" | tee "$out/profile_date.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/profile_gpu.txt"
[ -x bench/bench_gpt2 ] || make bench/bench_gpt2 CUDA_ARCH="-gencode arch=compute_90a,code=sm_90a" > "$out/build_profile.log" 2>&1 ||
    { tail -30 "$out/build_profile.log"; exit 1; }
# the tensor-pipe counters this ncu knows (Hopper: hmma for mma.sync, gmma for wgmma)
want="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
want="$want,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size"
known=$("$NCU" --query-metrics 2>/dev/null)
for m in sm__pipe_tensor_op_hmma_cycles_active sm__pipe_tensor_op_gmma_cycles_active; do
    grep -q "^$m " <<< "$known" && want="$want,$m.avg.pct_of_peak_sustained_elapsed"
done
raw="$out/profile_raw"
mkdir -p "$raw"
: > "$out/profile.txt"
for size in $sizes; do
    # the steps' own times first, without the profiler attached (ncu slows every launch, profiled or not)
    timeout 200 bench/bench_gpt2 --dtype $dt --breakdown $size 2>&1 | grep "^breakdown" | tee -a "$out/profile.txt"
    for w in prefill score; do
        [ "$size" = 124M ] && timeout 200 bench/bench_gpt2 --dtype $dt --only $w --prefill-seqs 16 --breakdown $size 2>&1 |
            grep "^breakdown" | tee -a "$out/profile.txt"
    done
    for kind in decode one prefill score; do
        [ "$kind" = prefill ] || [ "$kind" = score ] && [ "$size" != 124M ] && continue
        extra=""
        [ "$kind" = prefill ] && extra="--only prefill --prefill-seqs 16"
        [ "$kind" = score ] && extra="--only score"
        tag="$size-$dt-$kind"
        timeout 400 "$NCU" --profile-from-start off --clock-control none --metrics "$want" --csv --page raw \
            --log-file "$raw/$tag.ncu.csv" bench/bench_gpt2 --dtype $dt $extra --profile $kind --breakdown $size > "$raw/$tag.out" 2>&1
        grep -h "^profiled" "$raw/$tag.out" | tee -a "$out/profile.txt"
        python3 bench/profile_summary.py "$tag" "$raw/$tag.ncu.csv" | tee -a "$out/profile.txt"
    done
done
tar -C "$out" -czf "$out/profile_raw.tar.gz" profile_raw && rm -rf "$raw"
