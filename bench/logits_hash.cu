/* logits_hash — a fingerprint of a model's logits on the CUDA backend, to check that a kernel change keeps every bit.
   Usage: bench/logits_hash MODEL_DIR f16|bf16|f32 B T
   Runs gpt2_forward over B sequences of T fixed pseudo-random tokens (the same for every build) and prints the
   FNV-1a hash of all B*T*n_vocab fp32 logits. Build it before and after a change, run both on the same GPU: equal
   hashes mean equal bits (bench/RESULTS.md, ninth session). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: %s MODEL_DIR f16|bf16|f32 B T\n", argv[0]); return 2; }
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CUDA;
    o.dtype = !strcmp(argv[2], "bf16") ? GPT2_DTYPE_BF16 : !strcmp(argv[2], "f32") ? GPT2_DTYPE_F32 : GPT2_DTYPE_F16;
    const int B = atoi(argv[3]), T = atoi(argv[4]);
    if (B < 1 || T < 1) { fprintf(stderr, "B and T must be positive\n"); return 2; }
    o.max_batch = B;
    o.max_seq = T;
    gpt2_model *m = NULL;
    if (gpt2_load(&m, argv[1], &o) != GPT2_OK) { fprintf(stderr, "load: %s\n", gpt2_last_error()); return 1; }
    const int V = gpt2_model_config(m).n_vocab;
    int *tok = (int *)malloc(sizeof(int) * (size_t)B * T);
    float *lg = (float *)malloc(sizeof(float) * (size_t)B * T * V);
    if (!tok || !lg) { fprintf(stderr, "out of host memory\n"); return 1; }
    unsigned s = 12345u;
    for (size_t i = 0; i < (size_t)B * T; i++) { s = s * 1103515245u + 12345u; tok[i] = (int)((s >> 8) % (unsigned)V); }
    if (gpt2_forward(m, tok, B, T, lg) != GPT2_OK) { fprintf(stderr, "forward: %s\n", gpt2_last_error()); return 1; }
    unsigned long long h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)lg;
    for (size_t i = 0; i < (size_t)B * T * V * sizeof(float); i++) { h ^= p[i]; h *= 1099511628211ull; }
    printf("%s %s B=%d T=%d hash %016llx logit[0]=%.6f\n", argv[1], argv[2], B, T, h, lg[0]);
    free(tok); free(lg);
    gpt2_free(m);
    return 0;
}
