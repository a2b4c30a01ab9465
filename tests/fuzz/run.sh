#!/usr/bin/env bash
# tests/fuzz/run.sh [seconds] [harness...] — builds every fuzz harness (clang: libFuzzer + ASan + UBSan)
# and runs each over its regression inputs, its seed corpus and then [seconds] (default 30) of fresh
# fuzzing. One summary line per harness; exits non-zero when any input crashed, leaked, hung or broke
# a harness's check. Needs clang with libFuzzer (Debian: clang + libclang-rt-dev).
#
# Builds and working corpora go to build/fuzz/ (new finds stay out of the repository; copy one into
# tests/fuzz/corpus/NAME/ by hand when it is worth keeping). A crash leaves build/fuzz/crash-NAME-*
# and its log build/fuzz/NAME.log; reproduce it with build/fuzz/fuzz_NAME FILE.
set -u
cd "$(dirname "$0")/../.."
root=$(pwd)
secs=${1:-30}
shift || true
harnesses=${*:-safetensors pytorch config vocab merges encode decode batch}
cc=${FUZZ_CC:-clang}
out=build/fuzz
mkdir -p "$out"

flags=(-g -O1 -std=gnu99 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -fno-omit-frame-pointer -Wall -Wextra -DGPT2_NO_CUDA "-DGPT2_FUZZ_ROOT=\"$root\"" -I. -Itests/fuzz)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# build every harness at once (each compile is single-threaded), then run them one after another
for h in $harnesses; do
    { $cc "${flags[@]}" "tests/fuzz/fuzz_$h.c" -o "$out/fuzz_$h" -lm > "$out/$h.build.log" 2>&1; echo $? > "$out/$h.build.rc"; } &
done
wait

status=0
for h in $harnesses; do
    bin=$out/fuzz_$h log=$out/$h.log
    if [ "$(cat "$out/$h.build.rc")" != 0 ]; then
        echo "fuzz_$h: FAILED to build (see $out/$h.build.log)"
        sed -n 1,20p "$out/$h.build.log"
        status=1
        continue
    fi
    dict=(); [ -f "tests/fuzz/dict/$h.dict" ] && dict=(-dict="tests/fuzz/dict/$h.dict")
    opts=(-timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 "-artifact_prefix=$out/crash-$h-")
    # 1. every regression input once: each is a crash found before and fixed
    regressions=(); [ -d "tests/fuzz/regressions/$h" ] && mapfile -t regressions < <(find "tests/fuzz/regressions/$h" -type f | sort)
    if [ ${#regressions[@]} -gt 0 ] && ! "$bin" "${opts[@]}" "${regressions[@]}" > "$log" 2>&1; then
        echo "fuzz_$h: FAILED on a regression input ($log):"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*check failed|.*runtime error|Running: )' "$log" | tail -n 6
        status=1
        continue
    fi
    # 2. the seed corpus, then fresh fuzzing, in a scratch corpus that starts as a copy of the seeds
    work=$out/corpus/$h
    mkdir -p "$work"
    start=$(date +%s)
    if "$bin" "${opts[@]}" "${dict[@]}" -max_total_time="$secs" "$work" "tests/fuzz/corpus/$h" >> "$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1)
        echo "fuzz_$h: ok, ${runs:-?} runs in $(( $(date +%s) - start )) s ($cov), ${#regressions[@]} regression inputs"
    else
        echo "fuzz_$h: FAILED after $(( $(date +%s) - start )) s ($log):"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*check failed|.*runtime error|.*deadly signal|.*Test unit written)' "$log" | tail -n 6
        status=1
    fi
done
exit $status
