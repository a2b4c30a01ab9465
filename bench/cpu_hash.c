/* cpu_hash — a fingerprint of the CPU backend's logits and generated tokens, to check that a change keeps every bit.
   Usage: bench/cpu_hash MODEL_DIR
   Runs gpt2_forward over B = 1, 2, 3 sequences of 40 fixed tokens, then gpt2_generate on 3 requests (prompts of 10,
   20 and 30 tokens, 30 new each) greedy and then sampled, and prints the FNV-1a hash of all the logits and tokens.
   Build it (make bench/cpu_hash) before and after a change and run both on the same machine: equal hashes mean equal
   bits (bench/RESULTS.md, item 139). Plain C; no GPU needed. */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long hash = 1469598103934665603ull;
static void mix(const void *p, size_t n) {
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) { hash ^= c[i]; hash *= 1099511628211ull; }
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]); return 2; }
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CPU;
    o.max_batch = 3;
    o.max_seq = 128;
    gpt2_model *m;
    if (gpt2_load(&m, argv[1], &o) != GPT2_OK) { fprintf(stderr, "load: %s\n", gpt2_last_error()); return 1; }
    const int V = gpt2_model_config(m).n_vocab;
    int tok[3 * 40], out[3][30];
    for (int i = 0; i < 3 * 40; i++) tok[i] = (i * 7919 + 13) % V;
    float *lg = (float *)malloc(sizeof(float) * 3 * 40 * (size_t)V);
    if (!lg) { fprintf(stderr, "out of memory\n"); return 1; }
    for (int B = 1; B <= 3; B++) {
        if (gpt2_forward(m, tok, B, 40, lg) != GPT2_OK) { fprintf(stderr, "forward: %s\n", gpt2_last_error()); return 1; }
        mix(lg, sizeof(float) * B * 40 * (size_t)V);
    }
    gpt2_request r[3];
    memset(r, 0, sizeof r);
    for (int sampled = 0; sampled < 2; sampled++) {
        for (int i = 0; i < 3; i++) {
            r[i].prompt = tok + i * 40; r[i].prompt_len = 10 + 10 * i; r[i].max_new_tokens = 30; r[i].stop_token = -1;
            r[i].out = out[i];
            r[i].sampling.temperature = sampled ? 0.9f : 0.0f; r[i].sampling.top_k = 40; r[i].sampling.seed = 5 + i;
        }
        if (gpt2_generate(m, r, 3, NULL, NULL) != GPT2_OK) { fprintf(stderr, "generate: %s\n", gpt2_last_error()); return 1; }
        mix(out, sizeof out);
    }
    printf("%s cpu hash %016llx\n", argv[1], hash);
    free(lg);
    gpt2_free(m);
    return 0;
}
