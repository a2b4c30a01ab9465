#!/usr/bin/env bash
# tests/sanitize.sh — compute-sanitizer over gpt2.cuh's own kernels, on a GPU. Logs under $OUT (default /tmp/sanitize).
#   racecheck: tests/sanitize_kernels few (its `f32`, F32's product at every row count, takes ~520 s: run by hand)
#   memcheck, synccheck: tests/sanitize_kernels (the few-row products, the LN-folded ones and the sampler, no cuBLASLt)
#   racecheck: ./test_gpt2 residual attention prefill_rows, F16 and BF16 (tests that launch no cuBLASLt kernel:
#              residual + layer norm, prefill and decode attention in every form and dtype, F32's tiles included;
#              the sampler's own test takes over 100 s under it, so the sampler's racecheck is tests/sanitize_kernels')
#   memcheck:  ./test_gpt2 lnf generate lookahead step_logits score_chunks, F16 and BF16 (whole steps, cuBLASLt
#              included; scoring in chunks of the logits product)
# racecheck cannot run over cuBLASLt's kernels (tests/sanitize_kernels.cu says why), so whole steps get memcheck only.
# The seven runs go at once on the one GPU (each is bound by the sanitizer's host side): on an H100 they took 305 s
# together, their times summing to 900 s. Prints one line per run and exits non-zero when any run reports an error or a
# failed test.
# Usage: bash tests/sanitize.sh [TIMEOUT_S per run, default 480]; needs test_gpt2 and tests/sanitize_kernels built.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/sanitize}; mkdir -p "$out"
to=${1:-480}
run() { # NAME DTYPE TOOL PROGRAM ARGS...: in the background; its line into $out/NAME.line
    local name=$1 dt=$2 tool=$3; shift 3
    (
        GPT2_TEST_BACKEND=cuda GPT2_TEST_DTYPE=$dt timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 9 \
            $([ "$tool" = memcheck ] && echo --leak-check no) "$@" > "$out/$name.log" 2>&1
        rc=$?
        echo "$name: rc $rc; $(grep -hE "SUMMARY|^[0-9]+ (passed|checks)|Internal Sanitizer" "$out/$name.log" | tr '\n' ' ')" > "$out/$name.line"
    ) &
}
rm -f "$out"/*.line
run kernels_racecheck f16 racecheck tests/sanitize_kernels few
for tool in memcheck synccheck; do run "kernels_$tool" f16 "$tool" tests/sanitize_kernels; done
for dt in f16 bf16; do
    run "race_tests_$dt" "$dt" racecheck ./test_gpt2 residual attention prefill_rows
    run "mem_steps_$dt" "$dt" memcheck ./test_gpt2 lnf generate lookahead step_logits score_chunks
done
wait
bad=0
for f in "$out"/*.line; do
    cat "$f"
    grep -q ": rc 0;" "$f" || bad=1
done
[ "$(ls "$out"/*.line | wc -l)" = 7 ] || bad=1
echo "sanitize: $([ $bad = 0 ] && echo clean || echo 'errors (logs in '"$out"')')"
exit $bad
