/* bench_mpi — the throughput workload (bench_gpt2's) sharded across MPI ranks, one GPU per rank.

   mpirun -np N bench/bench_mpi MODEL_DIR TOTAL_BATCH [PROMPT=64] [NEW=192] [DTYPE=f16]

   Rank 0 loads MODEL_DIR and broadcasts it (gpt2_mpi_load); TOTAL_BATCH greedy requests of PROMPT
   random tokens and NEW new tokens each (no stop token) are split across the ranks by
   gpt2_mpi_generate, after one warm-up call of the same shape with 8 new tokens. Prints one JSON
   line: generated tokens/s end to end, the load/broadcast time, the slowest rank's time inside
   gpt2_generate, the share of the timed call spent outside generation (scatter, gather, imbalance),
   and the peak device memory of the busiest rank.

   mpirun -np N bench/bench_mpi --score MODEL_DIR TOTAL_TEXTS [LEN=1024] [DTYPE=f16]

   The scoring workload (bench_gpt2's score) sharded by gpt2_mpi_score: TOTAL_TEXTS texts of LEN random tokens, every
   token after the first scored (n_context 1; max_seq 1024, so a text of at most 1024 tokens is one window), after one
   warm-up call; the median of 3 timed calls. One JSON line: tokens scored/s, the call's time, the load time, the
   mean log-probability, and the device memory in use after the calls on the busiest rank. */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#define GPT2_MPI_IMPLEMENTATION
#include "gpt2_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gpt2_request *make_requests(int n, int prompt_len, int new_tokens, int vocab, int **store) {
    gpt2_request *r = (gpt2_request *)calloc((size_t)n, sizeof *r);
    *store = (int *)malloc((size_t)n * (prompt_len + new_tokens) * sizeof(int));
    for (int i = 0; i < n; i++) {
        int *p = *store + (size_t)i * (prompt_len + new_tokens);
        for (int t = 0; t < prompt_len; t++) p[t] = (int)(gpt2__mix64((uint64_t)i * 7919 + t) % (uint64_t)vocab);
        r[i].prompt = p; r[i].prompt_len = prompt_len;
        r[i].max_new_tokens = new_tokens; r[i].stop_token = -1; r[i].out = p + prompt_len;
    }
    return r;
}

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

/* --score MODEL_DIR TOTAL_TEXTS [LEN] [DTYPE] (argv after --score) */
static int score_main(int argc, char **argv, int rank, int size) {
    if (argc < 2) {
        if (!rank) fprintf(stderr, "usage: mpirun -np N bench_mpi --score MODEL_DIR TOTAL_TEXTS [LEN] [f16|bf16|f32]\n");
        return 2;
    }
    const char *dir = argv[0];
    const int total = atoi(argv[1]), T = argc > 2 ? atoi(argv[2]) : 1024;
    const char *dt = argc > 3 ? argv[3] : "f16";
    if (total < 1 || T < 2) {
        if (!rank) fprintf(stderr, "bench_mpi --score: %d texts of %d tokens: at least 1 text of 2 tokens\n", total, T);
        return 2;
    }
    gpt2_options opt = gpt2_default_options();
    opt.backend = GPT2_BACKEND_CUDA;
    opt.dtype = !strcmp(dt, "f32") ? GPT2_DTYPE_F32 : !strcmp(dt, "bf16") ? GPT2_DTYPE_BF16 : GPT2_DTYPE_F16;
    opt.max_batch = (total + size - 1) / size;
    opt.max_seq = 1024;
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    opt.device = ndev > 0 ? gpt2_mpi_local_rank(MPI_COMM_WORLD) % ndev : 0;
    gpt2_model *m;
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    gpt2_status st = gpt2_mpi_load(MPI_COMM_WORLD, &m, dir, &opt);
    const double load_s = MPI_Wtime() - t;
    if (st) {
        if (!rank) fprintf(stderr, "bench_mpi: %s\n", gpt2_last_error());
        return 1;
    }
    gpt2_config c = gpt2_model_config(m);
    int *tokens = NULL;
    float *lp = NULL;
    gpt2_score_request *reqs = NULL;
    int n = 0;
    if (!rank) {
        n = total;
        tokens = (int *)malloc((size_t)n * T * sizeof(int));
        lp = (float *)malloc((size_t)n * (T - 1) * sizeof(float));
        reqs = (gpt2_score_request *)calloc((size_t)n, sizeof *reqs);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < T; j++) tokens[(size_t)i * T + j] = (int)(gpt2__mix64((uint64_t)i * 7919 + j) % (uint64_t)c.n_vocab);
            reqs[i].tokens = tokens + (size_t)i * T; reqs[i].n_tokens = T; reqs[i].n_context = 1;
            reqs[i].logprobs = lp + (size_t)i * (T - 1);
        }
    }
    double ts[3];
    for (int r = -1; r < 3 && !st; r++) { /* r = -1: warm-up */
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        st = gpt2_mpi_score(MPI_COMM_WORLD, m, reqs, n);
        if (r >= 0) ts[r] = MPI_Wtime() - t;
    }
    if (st) {
        if (!rank) fprintf(stderr, "bench_mpi: %s\n", gpt2_last_error());
        gpt2_free(m);
        return 1;
    }
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    double used = (double)(total_b - free_b) / 1e9, mem_max = 0.0;
    MPI_Reduce(&used, &mem_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (!rank) {
        qsort(ts, 3, sizeof ts[0], cmp_d);
        double sum = 0.0;
        long scored = 0;
        for (int i = 0; i < n; i++) { sum += reqs[i].sum_logprob; scored += reqs[i].n_scored; }
        printf("{\"ranks\": %d, \"workload\": \"score\", \"layers\": %d, \"width\": %d, \"dtype\": \"%s\", \"texts\": %d, "
               "\"tokens\": %d, \"scored\": %ld, \"tok_per_s\": %.0f, \"total_s\": %.4f, \"load_s\": %.2f, "
               "\"mean_logprob\": %.4f, \"mem_GB_busiest_rank\": %.1f}\n",
               size, c.n_layer, c.n_embd, dt, total, T, scored, scored / ts[1], ts[1], load_s, sum / scored, mem_max);
        free(tokens); free(lp); free(reqs);
    }
    gpt2_free(m);
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && !strcmp(argv[1], "--score")) {
        const int rc = score_main(argc - 2, argv + 2, rank, size);
        MPI_Finalize();
        return rc;
    }
    if (argc < 3) {
        if (!rank) fprintf(stderr, "usage: mpirun -np N %s MODEL_DIR TOTAL_BATCH [PROMPT] [NEW] [f16|bf16|f32]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const char *dir = argv[1];
    int total = atoi(argv[2]), P = argc > 3 ? atoi(argv[3]) : 64, G = argc > 4 ? atoi(argv[4]) : 192;
    const char *dt = argc > 5 ? argv[5] : "f16";
    gpt2_options opt = gpt2_default_options();
    opt.backend = GPT2_BACKEND_CUDA;
    opt.dtype = !strcmp(dt, "f32") ? GPT2_DTYPE_F32 : !strcmp(dt, "bf16") ? GPT2_DTYPE_BF16 : GPT2_DTYPE_F16;
    opt.max_batch = (total + size - 1) / size;
    opt.max_seq = P + G;
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    opt.device = ndev > 0 ? gpt2_mpi_local_rank(MPI_COMM_WORLD) % ndev : 0;

    gpt2_model *m;
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    gpt2_status st = gpt2_mpi_load(MPI_COMM_WORLD, &m, dir, &opt);
    double load_s = MPI_Wtime() - t;
    if (st) {
        if (!rank) fprintf(stderr, "bench_mpi: %s\n", gpt2_last_error());
        MPI_Finalize();
        return 1;
    }
    gpt2_config c = gpt2_model_config(m);
    int *store = NULL;
    gpt2_request *reqs = NULL;
    int n = 0;
    if (!rank) { n = total; reqs = make_requests(n, P, G, c.n_vocab, &store); }

    /* warm-up: same batch shape, 8 new tokens (captures the decode graphs) */
    for (int i = 0; i < n; i++) reqs[i].max_new_tokens = 8;
    st = gpt2_mpi_generate(MPI_COMM_WORLD, m, reqs, n, NULL, NULL);
    for (int i = 0; i < n; i++) reqs[i].max_new_tokens = G;

    MPI_Barrier(MPI_COMM_WORLD);
    t = MPI_Wtime();
    if (!st) st = gpt2_mpi_generate(MPI_COMM_WORLD, m, reqs, n, NULL, NULL);
    double total_s = MPI_Wtime() - t;
    if (st) {
        if (!rank) fprintf(stderr, "bench_mpi: %s\n", gpt2_last_error());
        gpt2_free(m);
        MPI_Finalize();
        return 1;
    }
    double gen_max = 0.0, mem_max = 0.0;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    double used = (double)(total_b - free_b) / 1e9;
    MPI_Reduce(&gpt2__mpi_last.generate, &gen_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&used, &mem_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (!rank) {
        long tokens = 0;
        for (int i = 0; i < n; i++) tokens += reqs[i].n_out;
        printf("{\"ranks\": %d, \"layers\": %d, \"width\": %d, \"dtype\": \"%s\", \"batch\": %d, \"prompt\": %d, \"new\": %d, "
               "\"gen_tok_per_s\": %.0f, \"total_s\": %.3f, \"load_s\": %.2f, \"generate_s_slowest_rank\": %.3f, "
               "\"outside_generation_share\": %.3f, \"peak_mem_GB_busiest_rank\": %.1f}\n",
               size, c.n_layer, c.n_embd, dt, total, P, G, tokens / total_s, total_s, load_s, gen_max,
               (total_s - gen_max) / total_s, mem_max);
        free(reqs); free(store);
    }
    gpt2_free(m);
    MPI_Finalize();
    return 0;
}
