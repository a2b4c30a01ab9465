#!/bin/bash
# Builds the MPI test program (tests/mpi/test_mpi, CPU backend, plain C via mpicc) when it is missing or
# older than its sources, then runs test_gpt2's MPI tests (tests/mpi_tests.inc). Run from the repository root.
set -euo pipefail
bin=tests/mpi/test_mpi
srcs=(tests/mpi/test_mpi.c tests/mpi/workload.h gpt2_mpi.h gpt2.cuh wip/*.inc)
stale=0
[ -x "$bin" ] || stale=1
for s in "${srcs[@]}"; do [ -e "$s" ] && [ "$s" -nt "$bin" ] && stale=1; done
if [ "$stale" = 1 ]; then
    mpicc -x c -O2 -std=gnu99 -Wall -Wextra -fopenmp -DGPT2_NO_CUDA -I. tests/mpi/test_mpi.c -o "$bin" -lm
fi
./test_gpt2 mpi_
