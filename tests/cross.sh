#!/usr/bin/env bash
# tests/cross.sh — the CPU test suite (test_gpt2.cu as C, -DGPT2_NO_CUDA, OpenMP) cross-built for two platforms
# this machine is not, and run on each from the repository root:
#   windows-x86_64: x86_64-w64-mingw32-gcc (linked -static: no DLLs to find), run under wine
#   linux-aarch64:  aarch64-linux-gnu-gcc, run under qemu-aarch64 -L /usr/aarch64-linux-gnu
# The suites run in a copy of the tree's sources (git ls-files), so that no build output of this machine's runs
# in their place (the MPI tests' programs: there the MPI tests skip). Prints each build's warnings (-Wall -Wextra)
# and each suite's last line ("N passed, N failed") with its wall time; exits nonzero if either fails to build or
# fails a test. Arguments are test-name filters, as test_gpt2's.
# Needs (Debian 12): apt-get install mingw-w64 wine wine64 qemu-user gcc-aarch64-linux-gnu libgomp1-arm64-cross
# Not part of make test or CI.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
git -C "$(dirname "$0")/.." ls-files -z -co --exclude-standard | (cd "$(dirname "$0")/.." && tar --null -T - -cf -) |
    tar -xf - -C "$tmp/src" || exit 1
cd "$tmp/src"
status=0

# suite NAME COMPILER [extra flags] -- RUNNER...
suite() {
    local name=$1 cc=$2 flags=() bin="$tmp/$1.exe"
    shift 2
    while [ "$1" != "--" ]; do flags+=("$1"); shift; done
    shift
    if ! "$cc" -x c -O3 -std=gnu99 -Wall -Wextra -fopenmp -DGPT2_NO_CUDA -I. "${flags[@]}" test_gpt2.cu -o "$bin" -lm \
        2> "$tmp/$name.build"; then
        grep -E "error" "$tmp/$name.build" | head -n 20
        echo "$name: build failed ($("$cc" --version | head -n 1))"
        status=1
        return
    fi
    if grep -q "warning:" "$tmp/$name.build"; then
        echo "$name: $(grep -c "warning:" "$tmp/$name.build") warnings, the first:"
        grep "warning:" "$tmp/$name.build" | head -n 5
    fi
    local t0=$SECONDS
    "$@" "$bin" "${filters[@]}" > "$tmp/$name.log" 2>&1 || { grep -B 3 "^FAIL" "$tmp/$name.log"; status=1; }
    echo "$name: $(tail -n 1 "$tmp/$name.log" | tr -d '\r') ($((SECONDS - t0)) s)"
}

filters=("$@")
suite windows-x86_64 x86_64-w64-mingw32-gcc -static -- env WINEDEBUG=-all wine
suite linux-aarch64 aarch64-linux-gnu-gcc -- qemu-aarch64 -L /usr/aarch64-linux-gnu
exit $status
