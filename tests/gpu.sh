#!/usr/bin/env bash
# tests/gpu.sh — every GPU suite in one command, on a machine with an NVIDIA GPU (nvcc on PATH):
#   1. the test suite on the CUDA backend in F32, F16 and BF16 (GPT2_TEST_BACKEND=cuda ./test_gpt2)
#   2. compute-sanitizer: racecheck, memcheck and synccheck (tests/sanitize.sh)
#   3. the batch-file demo on the GPU against the CPU, and demo_mpi over 2 ranks (tests/gpu_demo.sh; needs Open MPI)
# Usage: bash tests/gpu.sh [quick] [--bench]
#   quick     suites 1 and 3 only (compute-sanitizer takes several minutes)
#   --bench   then build `make bench` and run bench/bench_gpt2 ${BENCH_ARGS:-124M} (bench/run.sh is the full table)
# Logs go to $OUT (default /tmp/gpu_tests), one file or folder per suite. Prints one line per suite and exits
# non-zero when any suite failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu_tests}; mkdir -p "$out"
quick=0; bench=0
for a in "$@"; do
    case $a in
        quick) quick=1 ;;
        --bench) bench=1 ;;
        *) echo "usage: bash tests/gpu.sh [quick] [--bench]" >&2; exit 2 ;;
    esac
done
bad=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
make test_gpt2 demo $(command -v mpicc > /dev/null && echo demo_mpi) > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }

for dt in f32 f16 bf16; do
    # the cuda_* tests loop over the three dtypes themselves: they run in the first pass only
    GPT2_TEST_BACKEND=cuda GPT2_TEST_DTYPE=$dt timeout 300 ./test_gpt2 $([ $dt = f32 ] || echo -cuda_) > "$out/test_$dt.log" 2>&1
    rc=$?
    echo "test_gpt2 cuda $dt: rc $rc; $(tail -n 1 "$out/test_$dt.log")"
    [ $rc = 0 ] || { bad=1; grep -E "FAIL" "$out/test_$dt.log" | head -20; }
done

if [ $quick = 0 ]; then
    if make tests/sanitize_kernels > "$out/build_sanitize.log" 2>&1; then
        OUT="$out/sanitize" bash tests/sanitize.sh || bad=1
    else
        tail -20 "$out/build_sanitize.log"; bad=1
    fi
fi

OUT="$out/gpu_demo" bash tests/gpu_demo.sh || bad=1

if [ $bench = 1 ]; then
    if make bench > "$out/build_bench.log" 2>&1; then
        timeout 240 bench/bench_gpt2 ${BENCH_ARGS:-124M} 2>&1 | tee "$out/bench.log"
    else
        tail -20 "$out/build_bench.log"; bad=1
    fi
fi
echo "gpu: $([ $bad = 0 ] && echo 'every suite passed' || echo "FAILED (logs in $out)")"
exit $bad
