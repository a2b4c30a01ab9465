/* bench_cpu — the CPU backend's speed on a GPT-2 of a standard shape with random weights (plain C, OpenMP).
   It writes the model as Hugging Face files (config.json + model.safetensors, F16 as published) under DIR, loads
   it through gpt2_load like any program, and times through the public API only:
     decode, batch 1     ms per generated token after a prompt of 16, and after a prompt of 896 (long context)
     decode, batch 8     ms per step of 8 sequences (prompts of 16)
     prefill             tokens/s of one prompt of 256, and of one of 1000 (the time to its first token)
   each the best of REPS runs, beside the bandwidth of a plain read of 512 MB with every thread, measured in the same
   run: a batch-1 step must read every weight once (F32 on the CPU: 4 bytes a parameter) plus the live K/V.
   Usage: bench/bench_cpu [SIZE: 124M (default), 355M, 774M, 1558M] [DIR (default /tmp/gpt2-bench-cpu-SIZE)] [REPS]
                          [WORKLOAD: decode, prompt or all (default)] [DTYPE: f32 (default), f16, bf16]
   DTYPE: the weights and the KV cache in that dtype (arithmetic float32). Each line ends with the process's peak RSS
   so far (the load's included).
   With WORKLOAD it runs only that one of the workloads bench/cpu_peers.sh times on every system (one a process, so
   the process's peak RSS is the workload's; speculation off, as the peers run; one untimed run, then REPS, each
   printed): decode, batch 1, a prompt of 128 then 128 greedy tokens, ms a token after the first; prompt, one prompt
   of 256, tokens/s to its first token. A DIR that holds model.safetensors is used as it is (any dtype).
   Build: make bench/bench_cpu (cc -O3 -fopenmp; no GPU needed). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/resource.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

/* ---- the model files: weights ~ N(0, 0.02)-like from a hash, layer norms 1 and 0, as make_random_model.py */
typedef struct { const char *name; int rows, cols; int kind; } tensor; /* kind 0 random, 1 ones, 2 zeros */
static uint16_t to_f16(float f) { /* round to nearest even; the values here are small and normal */
    uint32_t u; memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, e = (u >> 23) & 0xFF, m = u & 0x7FFFFF;
    if (e < 103) return (uint16_t)sign; /* below half's subnormals: zero */
    if (e < 113) { /* a subnormal half */
        m |= 0x800000;
        int sh = 126 - (int)e;
        uint32_t h = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((e - 112) << 10) | (m >> 13), rem = m & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}
static int write_model(const char *dir, int L, int C, int H) {
    const int V = 50257, P = 1024;
    int n = 4 + 12 * L;
    tensor *t = (tensor *)malloc(sizeof(tensor) * n);
    char (*names)[64] = (char (*)[64])malloc(64 * (size_t)n);
    int k = 0;
#define T(nm, r, c, kd) do { snprintf(names[k], 64, "%s", nm); t[k].name = names[k]; t[k].rows = r; t[k].cols = c; t[k].kind = kd; k++; } while (0)
    T("wte.weight", V, C, 0); T("wpe.weight", P, C, 0); T("ln_f.weight", 1, C, 1); T("ln_f.bias", 1, C, 2);
    for (int l = 0; l < L; l++) {
        char b[64];
#define TL(suffix, r, c, kd) do { snprintf(b, sizeof b, "h.%d.%s", l, suffix); T(b, r, c, kd); } while (0)
        TL("ln_1.weight", 1, C, 1); TL("ln_1.bias", 1, C, 2);
        TL("attn.c_attn.weight", C, 3 * C, 0); TL("attn.c_attn.bias", 1, 3 * C, 0);
        TL("attn.c_proj.weight", C, C, 0); TL("attn.c_proj.bias", 1, C, 0);
        TL("ln_2.weight", 1, C, 1); TL("ln_2.bias", 1, C, 2);
        TL("mlp.c_fc.weight", C, 4 * C, 0); TL("mlp.c_fc.bias", 1, 4 * C, 0);
        TL("mlp.c_proj.weight", 4 * C, C, 0); TL("mlp.c_proj.bias", 1, C, 0);
#undef TL
    }
#undef T
    /* header: JSON with each tensor's dtype, shape and byte range, padded to 8 bytes */
    size_t cap = (size_t)n * 160 + 64, len = 0, off = 0;
    char *hdr = (char *)malloc(cap);
    len += snprintf(hdr + len, cap - len, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)t[i].rows * t[i].cols * 2;
        if (t[i].rows == 1) len += snprintf(hdr + len, cap - len, "%s\"%s\":{\"dtype\":\"F16\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}",
                                            i ? "," : "", t[i].name, t[i].cols, off, off + bytes);
        else len += snprintf(hdr + len, cap - len, "%s\"%s\":{\"dtype\":\"F16\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}",
                             i ? "," : "", t[i].name, t[i].rows, t[i].cols, off, off + bytes);
        off += bytes;
    }
    len += snprintf(hdr + len, cap - len, "}");
    while (len % 8) hdr[len++] = ' ';
    char path[1024];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f) { fprintf(stderr, "bench_cpu: cannot write %s\n", path); return 1; }
    uint64_t hl = len;
    fwrite(&hl, 8, 1, f); fwrite(hdr, 1, len, f);
    uint16_t *buf = (uint16_t *)malloc(2 * (size_t)V * C);
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)t[i].rows * t[i].cols;
        for (size_t j = 0; j < cnt; j++) {
            float v = t[i].kind == 1 ? 1.0f : 0.0f;
            if (t[i].kind == 0) { /* sum of 4 uniforms: roughly normal, std 0.02 */
                float s = 0.0f;
                for (int q = 0; q < 4; q++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; s += (float)(x & 0xFFFF) / 65536.0f - 0.5f; }
                v = s * 0.0346f;
            }
            buf[j] = to_f16(v);
        }
        fwrite(buf, 2, cnt, f);
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    f = fopen(path, "w");
    if (!f) { fprintf(stderr, "bench_cpu: cannot write %s\n", path); return 1; }
    fprintf(f, "{\"model_type\": \"gpt2\", \"n_layer\": %d, \"n_embd\": %d, \"n_head\": %d, \"n_positions\": %d, "
               "\"vocab_size\": %d, \"layer_norm_epsilon\": 1e-05, \"activation_function\": \"gelu_new\"}\n", L, C, H, P, V);
    bad |= fclose(f) != 0;
    free(buf); free(hdr); free(names); free(t);
    if (bad) fprintf(stderr, "bench_cpu: writing the model under %s failed\n", dir);
    return bad;
}

/* ---- timing through the public API */
static int n_seen;
static double t_first;
static int on_token(void *user, int req, int tok) {
    (void)user; (void)req; (void)tok;
    if (n_seen++ == 0) t_first = now();
    return 0;
}
/* nb requests with prompts of plen, gen new tokens each; returns seconds from the first token to the end (decode) or,
   with gen 1, from the call to the end (prefill) */
static double run(gpt2_model *m, int nb, int plen, int gen, int *ids, int *out) {
    gpt2_request r[8];
    memset(r, 0, sizeof r);
    for (int i = 0; i < nb; i++) {
        r[i].prompt = ids + i; r[i].prompt_len = plen; r[i].max_new_tokens = gen; r[i].stop_token = -1;
        r[i].out = out + (size_t)i * gen; /* greedy */
    }
    n_seen = 0;
    double t0 = now();
    if (gpt2_generate(m, r, nb, on_token, NULL) != GPT2_OK) { fprintf(stderr, "bench_cpu: %s\n", gpt2_last_error()); exit(1); }
    double t1 = now();
    return gen == 1 ? t1 - t0 : t1 - t_first;
}

/* one of bench/cpu_peers.sh's workloads (the header says which), REPS times after an untimed run */
static long peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

static int peer_workload(gpt2_model *m, const char *workload, int reps, int *ids, int *out) {
    int decode = !strcmp(workload, "decode");
    m->spec = 0;
    for (int r = -1; r < reps; r++) {
        double s = decode ? run(m, 1, 128, 128, ids, out) : run(m, 1, 256, 1, ids, out);
        if (r < 0) continue;
        if (decode) printf("decode_ms_per_token %.3f\n", s / 127 * 1e3);
        else printf("prompt_tokens_per_s %.1f\n", 256 / s);
        fflush(stdout);
    }
    printf("peak_rss_mb %ld\n", peak_rss_mb());
    return 0;
}

static double read_bandwidth(void) {
    size_t n = (size_t)64 << 20; /* 512 MB of 8-byte words */
    uint64_t *a = (uint64_t *)malloc(n * sizeof(uint64_t));
    double best = 1e30;
    GPT2__OMP(omp parallel for schedule(static))
    for (long i = 0; i < (long)n; i++) a[i] = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    for (int rep = 0; rep < 5; rep++) {
        double t = now();
        uint64_t acc = 0;
        GPT2__OMP(omp parallel for schedule(static) reduction(^:acc))
        for (long i = 0; i < (long)n; i++) acc ^= a[i];
        t = now() - t;
        if (acc == 1u) puts(""); /* keeps the loop */
        if (t < best) best = t;
    }
    free(a);
    return n * sizeof(uint64_t) / best;
}

int main(int argc, char **argv) {
    const char *size = argc > 1 ? argv[1] : "124M";
    int L, C, H;
    if (!strcmp(size, "124M")) { L = 12; C = 768; H = 12; }
    else if (!strcmp(size, "355M")) { L = 24; C = 1024; H = 16; }
    else if (!strcmp(size, "774M")) { L = 36; C = 1280; H = 20; }
    else if (!strcmp(size, "1558M")) { L = 48; C = 1600; H = 25; }
    else { fprintf(stderr, "usage: bench_cpu [124M|355M|774M|1558M] [DIR] [REPS] [decode|prompt|all] [f32|f16|bf16]\n"); return 2; }
    char dir[512];
    if (argc > 2) snprintf(dir, sizeof dir, "%s", argv[2]);
    else snprintf(dir, sizeof dir, "/tmp/gpt2-bench-cpu-%s", size);
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (reps < 1) reps = 1;
    char cfg[600];
    snprintf(cfg, sizeof cfg, "%s/model.safetensors", dir);
    struct stat st;
    if (stat(cfg, &st) != 0 && write_model(dir, L, C, H)) return 1;

    const char *workload = argc > 4 && strcmp(argv[4], "all") ? argv[4] : NULL;
    if (workload && strcmp(workload, "decode") && strcmp(workload, "prompt")) {
        fprintf(stderr, "bench_cpu: WORKLOAD is decode, prompt or all\n");
        return 2;
    }
    const char *dt = argc > 5 ? argv[5] : "f32";
    gpt2_options o = gpt2_default_options();
    o.dtype = !strcmp(dt, "f16") ? GPT2_DTYPE_F16 : !strcmp(dt, "bf16") ? GPT2_DTYPE_BF16 : GPT2_DTYPE_F32;
    if (o.dtype == GPT2_DTYPE_F32 && strcmp(dt, "f32")) { fprintf(stderr, "bench_cpu: DTYPE is f32, f16 or bf16\n"); return 2; }
    o.backend = GPT2_BACKEND_CPU; o.max_batch = workload ? 1 : 8; o.max_seq = 1024;
    gpt2_model *m;
    double t = now();
    if (gpt2_load(&m, dir, &o) != GPT2_OK) { fprintf(stderr, "bench_cpu: %s\n", gpt2_last_error()); return 1; }
    double t_load = now() - t;
    static int ids[1024], out[8 * 128];
    for (int i = 0; i < 1024; i++) ids[i] = (int)((i * 7919u + 13) % 50257);
    if (workload) {
        int rc = peer_workload(m, workload, reps, ids, out);
        gpt2_free(m);
        return rc;
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    double bw = read_bandwidth();
    double params = (double)L * 12 * C * C + (double)L * 13 * C + 50257.0 * C + 1024.0 * C + 2.0 * C;
    const double es = o.dtype == GPT2_DTYPE_F32 ? 4 : 2; /* bytes a weight and a K/V element */
    printf("bench_cpu %s: %.0fM parameters (%s on the CPU: %.0f MB), %d threads, load %.2f s (peak RSS %ld MB), read "
           "bandwidth %.1f GB/s\n", size, params / 1e6, dt, params * es / 1e6, threads, t_load, peak_rss_mb(), bw / 1e9);

    const int gen = 32;
    double best;
    int ctxs[2] = {16, 896};
    for (int c = 0; c < 2; c++) {
        best = 1e30;
        for (int r = 0; r < reps; r++) { double s = run(m, 1, ctxs[c], gen, ids, out) / (gen - 1); if (s < best) best = s; }
        double ctx = ctxs[c] + gen / 2.0, bytes = params * es + (double)L * 2 * ctx * C * es;
        printf("decode batch 1, prompt %3d:  %7.2f ms/token   floor %.2f ms (%.0f MB at the read bandwidth): %.0f%%   "
               "peak RSS %ld MB\n", ctxs[c], best * 1e3, bytes / bw * 1e3, bytes / 1e6, 100.0 * bytes / bw / best, peak_rss_mb());
    }
    best = 1e30;
    for (int r = 0; r < reps; r++) { double s = run(m, 8, 16, gen, ids, out) / (gen - 1); if (s < best) best = s; }
    printf("decode batch 8, prompt  16:  %7.2f ms/step    %.0f tokens/s   peak RSS %ld MB\n", best * 1e3, 8 / best,
           peak_rss_mb());
    /* the products' FLOPs: 2 x non-embedding weights (W a layer) per token and layer, but in the last layer only qkv
       (3 C^2) for every token and the rest of it for the one row whose logits are wanted (the logits' own product
       not counted); attention's (4 x head size x the keys a row attends to, a layer and head) are not counted */
    const double W = (params - 1024.0 * C - 50257.0 * C) / L;
    int plens[2] = {256, 1000};
    for (int c = 0; c < 2; c++) {
        const int n = plens[c];
        best = 1e30;
        for (int r = 0; r < reps; r++) { double s = run(m, 1, n, 1, ids, out); if (s < best) best = s; }
        printf("prefill, one prompt of %4d:  %7.1f ms        %.0f tokens/s (%.1f GFLOP/s in the products)   peak RSS %ld MB\n",
               n, best * 1e3, n / best, (n * 2.0 * (W * (L - 1) + 3.0 * C * C) + 2.0 * (W - 3.0 * C * C)) / best / 1e9,
               peak_rss_mb());
    }
    gpt2_free(m);
    return 0;
}
