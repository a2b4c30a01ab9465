#!/bin/bash
# One device call: build, every test on the CUDA backend in F32/F16/BF16, then compute-sanitizer
# (tests/sanitize.sh: racecheck, memcheck and synccheck). Logs go to $OUT (or ./device_logs). Usage: bash bench/device_check.sh [quick]
OUT=${OUT:-device_logs}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
make test_gpt2 > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
for dt in f32 f16 bf16; do
    GPT2_TEST_BACKEND=cuda GPT2_TEST_DTYPE=$dt timeout 90 ./test_gpt2 > "$OUT/test_$dt.log" 2>&1
    echo "== $dt: rc $?"; grep -E "FAIL|max \|logit|passed|^    " "$OUT/test_$dt.log" | head -40
done
if [ "$1" != quick ]; then
make tests/sanitize_kernels > "$OUT/build_sanitize.log" 2>&1 || { tail -20 "$OUT/build_sanitize.log"; exit 1; }
OUT="$OUT/sanitize" bash tests/sanitize.sh   # racecheck, memcheck and synccheck on what each can run over
fi
make bench > "$OUT/build_bench.log" 2>&1 || { tail -20 "$OUT/build_bench.log"; exit 1; }
[ -n "$BREAKDOWN" ] && timeout 120 bench/bench_gpt2 --breakdown 2>&1 | tee "$OUT/breakdown.log"
timeout 240 bench/bench_gpt2 ${BENCH_ARGS:-124M} 2>&1 | tee "$OUT/bench.log"
