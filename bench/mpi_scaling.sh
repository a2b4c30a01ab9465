#!/usr/bin/env bash
# bench/mpi_scaling.sh [MAXRANKS] — the throughput workload under mpirun at 1, 2, 4, ... ranks (one GPU
# each) for the 124M and 1558M shapes: weak scaling (batch grows with the ranks: 1024 / 256 per rank)
# and strong scaling (batch fixed at 1024 / 256); and the scoring workload (gpt2_mpi_score, 16 texts of
# 1024 tokens per rank), weak scaling. One JSON line per run; logs under $OUT when set.
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-$(nvidia-smi -L | wc -l)}
out=${OUT:-/tmp}
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# BENCH_MPI=path: a bench_mpi already built for this GPU (else it is built here)
if [ -n "${BENCH_MPI:-}" ]; then cp "$BENCH_MPI" /tmp/bench_mpi; else
nvcc -x cu -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xcompiler -fopenmp -I. $(mpicc --showme:compile) \
     bench/bench_mpi.cu -o /tmp/bench_mpi -lcublasLt -lcublas -lgomp $(mpicc --showme:link)
fi
python3 bench/make_random_model.py 124M /tmp/m124M
python3 bench/make_random_model.py 1558M /tmp/m1558M
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1
run() { # NP MODEL BATCH
    mpirun --allow-run-as-root -np "$1" --bind-to none -x NCCL_NVLS_ENABLE /tmp/bench_mpi "$2" "$3" 64 192 f16 | tee -a "$out/mpi_scaling.jsonl"
}
score() { # NP MODEL TEXTS
    mpirun --allow-run-as-root -np "$1" --bind-to none -x NCCL_NVLS_ENABLE /tmp/bench_mpi --score "$2" "$3" 1024 f16 | tee -a "$out/mpi_scaling.jsonl"
}
for model in 124M 1558M; do
    per=$([ $model = 124M ] && echo 1024 || echo 256)
    np=1
    while [ $np -le "$max" ]; do
        run $np /tmp/m$model $((per * np))                   # weak
        [ $np -gt 1 ] && run $np /tmp/m$model $per           # strong
        score $np /tmp/m$model $((16 * np))                  # scoring, weak
        np=$((np * 2))
    done
done
