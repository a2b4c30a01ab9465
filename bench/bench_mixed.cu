/* bench_mixed — issue 8's mixed workload: continuous batching against static batches of the same size.

   bench/bench_mixed MODEL_DIR [N=4096] [SLOTS=256] [cpu|cuda] [f16|bf16|f32] [--no-hold]

   N greedy requests (no stop token) with prompt lengths drawn uniformly from 16..512 and
   max_new_tokens from 16..256 (fixed seed), random prompt tokens. Continuous: one gpt2_generate
   over all N with SLOTS KV slots, a finished request's slot taking the next waiting one at once.
   Static: the same requests in consecutive groups of SLOTS, one gpt2_generate per group, so each
   group runs until its longest request ends. Both on the same model; prints generated tokens/s of
   each, the ratio, whether every request's tokens agree between the two, and a hash of the tokens (to compare
   builds). --no-hold: an idle engine's requests decode as their prompts end (gpt2_generate's
   earlier rule), for comparison. */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"

static const char *dtype_name(gpt2_dtype d) {
    return d == GPT2_DTYPE_F32 ? "F32" : d == GPT2_DTYPE_F16 ? "F16" : d == GPT2_DTYPE_BF16 ? "BF16" : "AUTO";
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [N=4096] [SLOTS=256] [cpu|cuda] [f16|bf16|f32]\n", argv[0]);
        return 2;
    }
    const int N = argc > 2 ? atoi(argv[2]) : 4096, SLOTS = argc > 3 ? atoi(argv[3]) : 256;
    const int PMIN = 16, PMAX = 512, GMIN = 16, GMAX = 256;
    gpt2_options opt = gpt2_default_options();
    if (argc > 4) opt.backend = !strcmp(argv[4], "cpu") ? GPT2_BACKEND_CPU : GPT2_BACKEND_CUDA;
    if (argc > 5) opt.dtype = !strcmp(argv[5], "f32") ? GPT2_DTYPE_F32 : !strcmp(argv[5], "bf16") ? GPT2_DTYPE_BF16 : GPT2_DTYPE_F16;
    opt.max_batch = SLOTS;
    opt.max_seq = PMAX + GMAX;
    gpt2_model *m;
    if (gpt2_load(&m, argv[1], &opt)) { fprintf(stderr, "bench_mixed: %s\n", gpt2_last_error()); return 1; }
    m->no_hold = argc > 6 && !strcmp(argv[6], "--no-hold");
    const int V = gpt2_model_config(m).n_vocab, stride = PMAX + GMAX;
    int *prompts = (int *)malloc((size_t)N * stride * sizeof(int));
    int *outs[2] = {(int *)malloc((size_t)N * GMAX * sizeof(int)), (int *)malloc((size_t)N * GMAX * sizeof(int))};
    gpt2_request *r[2] = {(gpt2_request *)calloc((size_t)N, sizeof(gpt2_request)), (gpt2_request *)calloc((size_t)N, sizeof(gpt2_request))};
    long prompt_tokens = 0;
    for (int i = 0; i < N; i++) {
        int plen = PMIN + (int)(gpt2__mix64(2 * (uint64_t)i) % (uint64_t)(PMAX - PMIN + 1));
        int gen = GMIN + (int)(gpt2__mix64(2 * (uint64_t)i + 1) % (uint64_t)(GMAX - GMIN + 1));
        for (int t = 0; t < plen; t++) prompts[(size_t)i * stride + t] = (int)(gpt2__mix64(((uint64_t)i << 20) + t + 99) % (uint64_t)V);
        prompt_tokens += plen;
        for (int k = 0; k < 2; k++) {
            r[k][i].prompt = prompts + (size_t)i * stride; r[k][i].prompt_len = plen;
            r[k][i].max_new_tokens = gen; r[k][i].stop_token = -1; r[k][i].out = outs[k] + (size_t)i * GMAX;
        }
    }
    /* warm-up: one small static group (graphs, kernels, cuBLASLt plans) */
    int w = SLOTS < N ? SLOTS : N;
    if (gpt2_generate(m, r[1], w, NULL, NULL)) { fprintf(stderr, "bench_mixed: %s\n", gpt2_last_error()); return 1; }
    double t0 = now_s();
    if (gpt2_generate(m, r[0], N, NULL, NULL)) { fprintf(stderr, "bench_mixed: %s\n", gpt2_last_error()); return 1; }
    double t_cont = now_s() - t0;
    t0 = now_s();
    for (int g = 0; g < N; g += SLOTS) {
        int n = N - g < SLOTS ? N - g : SLOTS;
        if (gpt2_generate(m, r[1] + g, n, NULL, NULL)) { fprintf(stderr, "bench_mixed: %s\n", gpt2_last_error()); return 1; }
    }
    double t_static = now_s() - t0;
    long gen_tokens = 0;
    int differ = 0;
    for (int i = 0; i < N; i++) {
        gen_tokens += r[0][i].n_out;
        differ += r[0][i].n_out != r[1][i].n_out ||
                  memcmp(r[0][i].out, r[1][i].out, (size_t)r[0][i].n_out * sizeof(int)) != 0;
    }
    const char *be = gpt2_model_backend(m) == GPT2_BACKEND_CUDA ? "cuda" : "cpu";
    printf("mixed %d requests (prompt %d..%d, new %d..%d; %ld prompt + %ld generated tokens), %d slots, %s %s\n", N, PMIN,
           PMAX, GMIN, GMAX, prompt_tokens, gen_tokens, SLOTS, be, dtype_name(gpt2_model_dtype(m)));
    printf("continuous %9.0f generated tokens/s (%.2f s)\n", gen_tokens / t_cont, t_cont);
    printf("static     %9.0f generated tokens/s (%.2f s)\n", gen_tokens / t_static, t_static);
    printf("continuous / static = %.2fx; requests whose tokens differ between the two: %d of %d\n", t_static / t_cont, differ, N);
    unsigned long long h = 1469598103934665603ull; /* FNV-1a over every request's tokens, to compare builds */
    for (int i = 0; i < N; i++)
        for (int t = 0; t < r[0][i].n_out; t++) { h ^= (unsigned)r[0][i].out[t]; h *= 1099511628211ull; }
    printf("tokens hash %016llx\n", h);
    gpt2_free(m);
    free(prompts); free(outs[0]); free(outs[1]); free(r[0]); free(r[1]);
    return 0;
}
