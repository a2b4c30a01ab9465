/* test_gpt2 — the test suite: logits against float64 Hugging Face references, tokenizer against
   tiktoken/HF, sampler, generation, bad input. One test per behaviour; ends with "N passed, N failed".

   Usage: ./test_gpt2 [substring...]     run the tests whose names contain any substring (all if none)
   GPT2_TEST_BACKEND=cpu|cuda (default cpu), GPT2_TEST_DTYPE=f32|f16|bf16 (default f32) pick what the
   model tests run on. Run from the repository root (fixtures are read from tests/ and weights/). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* A test returns 0 when it passes, 1 when it fails, SKIP when what it needs is absent (no GPU);
   EXPECT prints what differed, by how much, where, and fails it. */
#define SKIP 2
#define EXPECT(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            printf("    %s:%d: ", __FILE__, __LINE__);                             \
            printf(__VA_ARGS__);                                                   \
            printf("\n");                                                          \
            return 1;                                                              \
        }                                                                          \
    } while (0)

typedef struct test_case { const char *name; int (*fn)(void); } test_case;

/* the backend and dtype the model tests run on (from the environment) */
static gpt2_options test_options(void) {
    gpt2_options o = gpt2_default_options();
    const char *b = getenv("GPT2_TEST_BACKEND"), *d = getenv("GPT2_TEST_DTYPE");
    o.backend = (b && !strcmp(b, "cuda")) ? GPT2_BACKEND_CUDA : GPT2_BACKEND_CPU;
    o.dtype = (d && !strcmp(d, "f16")) ? GPT2_DTYPE_F16 : (d && !strcmp(d, "bf16")) ? GPT2_DTYPE_BF16 : GPT2_DTYPE_F32;
    return o;
}


/* ---------------------------------------------------------------- fixtures: reference tensors */

/* A tensor read from a reference.safetensors (tokens/prompt/greedy I32, logits F32). */
typedef struct ref_tensor { int ndim; long shape[4]; size_t count; void *data; } ref_tensor;

/* Reads tensor `name` from a safetensors file into freshly allocated memory (I32 or F32 only). */
static int ref_read(const char *path, const char *name, ref_tensor *t) {
    char *buf;
    size_t len;
    if (gpt2__read_file(path, &buf, &len)) return 0;
    int ok = 0;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0 && len >= 8; i--) hlen = (hlen << 8) | (unsigned char)buf[i];
    if (len >= 8 && hlen <= len - 8) {
        gpt2__json j = {buf + 8, buf + 8, buf + 8 + hlen, path, 0};
        int first = 1;
        char key[128];
        size_t klen;
        while (!ok && gpt2__json_member(&j, &first, key, sizeof key, &klen) == 1) {
            if (strcmp(key, name)) { if (gpt2__json_skip(&j)) break; continue; }
            int f2 = 1;
            char fk[32];
            double off[2] = {0, 0};
            t->ndim = 0;
            while (gpt2__json_member(&j, &f2, fk, sizeof fk, &klen) == 1) {
                if (!strcmp(fk, "shape") || !strcmp(fk, "data_offsets")) {
                    int sh = fk[0] == 's', c = 0;
                    gpt2__json_ws(&j); j.p++; gpt2__json_ws(&j);
                    while (*j.p != ']') {
                        double v;
                        gpt2__json_number(&j, &v);
                        if (sh && c < 4) t->shape[c] = (long)v; else if (!sh && c < 2) off[c] = v;
                        c++;
                        gpt2__json_ws(&j);
                        if (*j.p == ',') j.p++;
                        gpt2__json_ws(&j);
                    }
                    j.p++;
                    if (sh) t->ndim = c;
                } else gpt2__json_skip(&j);
            }
            t->count = 1;
            for (int d = 0; d < t->ndim; d++) t->count *= (size_t)t->shape[d];
            size_t bytes = (size_t)(off[1] - off[0]);
            t->data = malloc(bytes ? bytes : 1);
            memcpy(t->data, buf + 8 + hlen + (size_t)off[0], bytes);
            ok = bytes == t->count * 4;
        }
    }
    free(buf);
    return ok;
}

/* The fixture directories: every tests/models/NAME plus the embedded model in weights/. */
#include <dirent.h>
static int fixture_dirs(char dirs[][256], int cap) {
    int n = 0;
    DIR *d = opendir("tests/models");
    struct dirent *e;
    while (d && (e = readdir(d)) && n < cap) {
        if (e->d_name[0] == '.') continue;
        snprintf(dirs[n++], 256, "tests/models/%.200s", e->d_name);
    }
    if (d) closedir(d);
    FILE *f = fopen("weights/reference.safetensors", "rb");
    if (f && n < cap) { fclose(f); snprintf(dirs[n++], 256, "weights"); }
    /* a fixed order, whatever readdir gives */
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++)
            if (strcmp(dirs[i], dirs[k]) > 0) { char t[256]; memcpy(t, dirs[i], 256); memcpy(dirs[i], dirs[k], 256); memcpy(dirs[k], t, 256); }
    return n;
}

static int backend_unavailable(const gpt2_options *o) {
#if GPT2__CUDA
    char why[256];
    return o->backend == GPT2_BACKEND_CUDA && !gpt2__cuda_usable(o->device, why, sizeof why);
#else
    return o->backend == GPT2_BACKEND_CUDA;
#endif
}

/* DESIGN.md's Numerics table: the logit tolerance factor for the backend and dtype under test */
static double logit_tolerance(const gpt2_options *o) {
    if (o->dtype != GPT2_DTYPE_F32) return 5e-2; /* either backend: weights and KV cache in F16 / BF16 */
    return o->backend == GPT2_BACKEND_CPU ? 1e-4 : 1e-3;
}

/* log-softmax of row l [V] in double into out [V]: the reference a generated token's logprobs are held to */
static void ref_log_softmax(const float *l, int V, double *out) {
    double mx = -INFINITY, sum = 0.0;
    for (int v = 0; v < V; v++) mx = l[v] > mx ? l[v] : mx;
    for (int v = 0; v < V; v++) sum += exp((double)l[v] - mx);
    for (int v = 0; v < V; v++) out[v] = (double)l[v] - mx - log(sum);
}

/* ---------------------------------------------------------------- model tests */

static int test_logits_match_reference(void) {
    gpt2_options o = test_options();
    if (backend_unavailable(&o)) return SKIP;
    char dirs[64][256];
    int nd = fixture_dirs(dirs, 64);
    EXPECT(nd >= 4, "only %d fixtures found under tests/models (run from the repository root)", nd);
    double tol = logit_tolerance(&o);
    for (int f = 0; f < nd; f++) {
        char path[600];
        ref_tensor tok, ref;
        snprintf(path, sizeof path, "%.255s/reference.safetensors", dirs[f]);
        EXPECT(ref_read(path, "tokens", &tok) && ref_read(path, "logits", &ref), "%s: cannot read tokens/logits", path);
        int B = (int)tok.shape[0], T = (int)tok.shape[1], V = (int)ref.shape[2];
        gpt2_model *m;
        gpt2_status st = gpt2_load(&m, dirs[f], &o);
        EXPECT(st == GPT2_OK, "%s: load failed: %s", dirs[f], gpt2_last_error());
        EXPECT(gpt2_model_config(m).n_vocab == V, "%s: vocab %d, reference has %d", dirs[f], gpt2_model_config(m).n_vocab, V);
        float *out = (float *)malloc(ref.count * sizeof(float));
        st = gpt2_forward(m, (const int *)tok.data, B, T, out);
        EXPECT(st == GPT2_OK, "%s: forward failed: %s", dirs[f], gpt2_last_error());
        const float *r = (const float *)ref.data;
        double max_ref = 0, max_err = 0;
        size_t worst = 0;
        for (size_t i = 0; i < ref.count; i++) {
            if (fabs(r[i]) > max_ref) max_ref = fabs(r[i]);
            double e = fabs((double)out[i] - r[i]);
            if (!(e <= max_err)) { max_err = e; worst = i; }
        }
        int agree = 0;
        for (int p = 0; p < B * T; p++)
            agree += gpt2__sample_greedy(out + (size_t)p * V, V) == gpt2__sample_greedy(r + (size_t)p * V, V);
        double limit = tol * (1 + max_ref);
        printf("    %-32s max |logit err| %.3g (limit %.3g, max |logit| %.3g), argmax agrees %d/%d\n",
               dirs[f], max_err, limit, max_ref, agree, B * T);
        EXPECT(max_err <= limit, "%s: logit %zu (batch %zu, pos %zu, token %zu) is %.6f, reference %.6f: error %.3g > %.3g",
               dirs[f], worst, worst / ((size_t)T * V), worst / V % T, worst % V, out[worst], r[worst], max_err, limit);
        if (o.dtype != GPT2_DTYPE_F32)
            EXPECT(agree >= 0.98 * B * T, "%s: argmax agrees at %d of %d positions (< 98%%)", dirs[f], agree, B * T);
        free(out); free(tok.data); free(ref.data);
        gpt2_free(m);
    }
    return 0;
}

static int test_greedy_continuation_matches_reference(void) {
    gpt2_options o = test_options();
    if (backend_unavailable(&o) || o.dtype != GPT2_DTYPE_F32) return SKIP; /* "identical" is an F32 promise */
    char dirs[64][256];
    int nd = fixture_dirs(dirs, 64);
    EXPECT(nd >= 4, "only %d fixtures found", nd);
    for (int f = 0; f < nd; f++) {
        char path[600];
        ref_tensor prompt, greedy;
        snprintf(path, sizeof path, "%.255s/reference.safetensors", dirs[f]);
        EXPECT(ref_read(path, "prompt", &prompt) && ref_read(path, "greedy", &greedy), "%s: cannot read prompt/greedy", path);
        gpt2_model *m;
        EXPECT(gpt2_load(&m, dirs[f], &o) == GPT2_OK, "%s: %s", dirs[f], gpt2_last_error());
        int out[1024];
        gpt2_request r;
        memset(&r, 0, sizeof r);
        r.prompt = (const int *)prompt.data; r.prompt_len = (int)prompt.count;
        r.max_new_tokens = (int)greedy.count; r.stop_token = -1; r.out = out;
        EXPECT(gpt2_generate(m, &r, 1, NULL, NULL) == GPT2_OK, "%s: %s", dirs[f], gpt2_last_error());
        EXPECT(r.n_out == (int)greedy.count, "%s: %d tokens generated, expected %zu", dirs[f], r.n_out, greedy.count);
        const int *g = (const int *)greedy.data;
        for (int i = 0; i < r.n_out; i++)
            EXPECT(out[i] == g[i], "%s: greedy token %d is %d, reference %d", dirs[f], i, out[i], g[i]);
        free(prompt.data); free(greedy.data);
        gpt2_free(m);
    }
    return 0;
}

/* A deterministic mix of requests over a fixture: prompt lengths, lengths to generate, sampling. */
static void make_requests(gpt2_request *r, int n, int *prompts, int *outs, int V, int max_seq) {
    uint64_t s = 12345;
    for (int i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof r[i]);
        int plen = 1 + (int)(gpt2__mix64(s + 3 * i) % (uint64_t)(max_seq / 2));
        int gen = 1 + (int)(gpt2__mix64(s + 3 * i + 1) % (uint64_t)(max_seq - plen));
        for (int t = 0; t < plen; t++) prompts[i * max_seq + t] = (int)(gpt2__mix64(s * 7 + i * 1000 + t) % (uint64_t)V);
        r[i].prompt = prompts + i * max_seq; r[i].prompt_len = plen; r[i].max_new_tokens = gen;
        r[i].out = outs + i * max_seq; r[i].stop_token = -1;
        if (i % 3) { r[i].sampling.temperature = 0.7f + 0.1f * (i % 5); r[i].sampling.seed = 1000 + i; }
        if (i % 3 == 2) r[i].sampling.top_k = 5;
        if (i % 4 == 3) r[i].sampling.top_p = 0.8f;
    }
}

static int test_outputs_independent_of_max_batch(void) {
    gpt2_options o = test_options();
    if (backend_unavailable(&o)) return SKIP;
    enum { N = 40 };
    const char *dir = "tests/models/f32_bare_buffers";
    int batches[3] = {1, 7, 64}, *first = NULL;
    for (int b = 0; b < 3; b++) {
        o.max_batch = batches[b];
        gpt2_model *m;
        EXPECT(gpt2_load(&m, dir, &o) == GPT2_OK, "%s: %s", dir, gpt2_last_error());
        int S = gpt2_model_max_seq(m), V = gpt2_model_config(m).n_vocab;
        int *prompts = (int *)calloc((size_t)N * S, sizeof(int)), *outs = (int *)calloc((size_t)N * S, sizeof(int));
        gpt2_request r[N];
        make_requests(r, N, prompts, outs, V, S);
        EXPECT(gpt2_generate(m, r, N, NULL, NULL) == GPT2_OK, "max_batch %d: %s", batches[b], gpt2_last_error());
        for (int i = 0; i < N; i++) EXPECT(r[i].n_out == r[i].max_new_tokens, "request %d: %d of %d tokens", i, r[i].n_out, r[i].max_new_tokens);
        if (!first) first = outs;
        else {
            for (int i = 0; i < N; i++)
                for (int t = 0; t < r[i].n_out; t++)
                    EXPECT(outs[i * S + t] == first[i * S + t], "max_batch %d: request %d token %d is %d, with max_batch 1 it was %d",
                           batches[b], i, t, outs[i * S + t], first[i * S + t]);
            free(outs);
        }
        free(prompts);
        gpt2_free(m);
    }
    free(first);
    return 0;
}

/* generate's KV-cached decode must agree with a full forward over prompt + generated tokens */
static int test_generate_agrees_with_forward(void) {
    gpt2_options o = test_options();
    if (backend_unavailable(&o) || o.dtype != GPT2_DTYPE_F32) return SKIP;
    const char *dir = "tests/models/f16_prefixed_lmhead";
    gpt2_model *m;
    EXPECT(gpt2_load(&m, dir, &o) == GPT2_OK, "%s: %s", dir, gpt2_last_error());
    gpt2_config c = gpt2_model_config(m);
    int P = 5, G = 20, seq[64], out[64];
    for (int i = 0; i < P; i++) seq[i] = (i * 37 + 11) % c.n_vocab;
    gpt2_request r;
    memset(&r, 0, sizeof r);
    r.prompt = seq; r.prompt_len = P; r.max_new_tokens = G; r.stop_token = -1; r.out = out;
    EXPECT(gpt2_generate(m, &r, 1, NULL, NULL) == GPT2_OK, "%s", gpt2_last_error());
    memcpy(seq + P, out, (size_t)G * sizeof(int));
    float *logits = (float *)malloc((size_t)(P + G) * c.n_vocab * sizeof(float));
    EXPECT(gpt2_forward(m, seq, 1, P + G - 1, logits) == GPT2_OK, "%s", gpt2_last_error());
    for (int i = 0; i < G; i++) {
        int a = gpt2__sample_greedy(logits + (size_t)(P - 1 + i) * c.n_vocab, c.n_vocab);
        EXPECT(a == out[i], "token %d: generate gave %d, argmax of forward logits is %d", i, out[i], a);
    }
    free(logits);
    gpt2_free(m);
    return 0;
}

typedef struct stop_ctx { int stop_after[8]; int seen[8]; int order_ok; int last[8]; } stop_ctx;
static int stop_cb(void *user, int req, int tok) {
    stop_ctx *c = (stop_ctx *)user;
    c->last[req] = tok;
    return ++c->seen[req] >= c->stop_after[req];
}

static int test_callback_and_stop_token_end_requests(void) {
    gpt2_options o = test_options();
    if (backend_unavailable(&o)) return SKIP;
    o.max_batch = 2; /* more requests than slots */
    gpt2_model *m;
    EXPECT(gpt2_load(&m, "tests/models/micro_f32", &o) == GPT2_OK, "%s", gpt2_last_error());
    int prompt[3] = {1, 2, 3}, outs[5][16];
    gpt2_request r[5];
    stop_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    for (int i = 0; i < 5; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].prompt = prompt; r[i].prompt_len = 3; r[i].max_new_tokens = 10; r[i].out = outs[i]; r[i].stop_token = -1;
        ctx.stop_after[i] = 100;
    }
    r[0].max_new_tokens = 0;   /* nothing to generate */
    ctx.stop_after[1] = 1;     /* the callback ends it after one token */
    ctx.stop_after[2] = 4;
    /* request 3 stops at its stop token: the greedy continuation's 3rd token */
    gpt2_request probe = r[3];
    int probe_out[16];
    probe.out = probe_out;
    EXPECT(gpt2_generate(m, &probe, 1, NULL, NULL) == GPT2_OK, "%s", gpt2_last_error());
    r[3].stop_token = probe_out[2];
    int expect_len3 = 0;
    while (probe_out[expect_len3] != probe_out[2]) expect_len3++;
    expect_len3++;
    EXPECT(gpt2_generate(m, r, 5, stop_cb, &ctx) == GPT2_OK, "%s", gpt2_last_error());
    EXPECT(r[0].n_out == 0 && ctx.seen[0] == 0, "max_new_tokens 0 gave %d tokens", r[0].n_out);
    EXPECT(r[1].n_out == 1 && ctx.seen[1] == 1, "callback stop after 1: %d tokens, %d callbacks", r[1].n_out, ctx.seen[1]);
    EXPECT(r[2].n_out == 4, "callback stop after 4: %d tokens", r[2].n_out);
    EXPECT(r[3].n_out == expect_len3 && outs[3][expect_len3 - 1] == r[3].stop_token,
           "stop token %d: %d tokens, expected %d ending with it", r[3].stop_token, r[3].n_out, expect_len3);
    EXPECT(r[4].n_out == 10 && ctx.seen[4] == 10, "unstopped request: %d tokens, %d callbacks", r[4].n_out, ctx.seen[4]);
    for (int i = 1; i < 5; i++) EXPECT(ctx.last[i] == outs[i][r[i].n_out - 1], "request %d: callback's last token differs from out", i);
    gpt2_free(m);
    return 0;
}

/* ---------------------------------------------------------------- sampler tests */

static int test_sampler_greedy_takes_lowest_index_on_ties(void) {
    float l[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 2.0f};
    gpt2_sampling s;
    memset(&s, 0, sizeof s);
    gpt2__cand sc[6];
    EXPECT(gpt2__sample(l, 6, &s, 0, sc) == 1, "greedy picked %d, expected 1", gpt2__sample(l, 6, &s, 0, sc));
    s.temperature = 1.0f; s.top_k = 1;
    for (int d = 0; d < 50; d++) EXPECT(gpt2__sample(l, 6, &s, (uint64_t)d, sc) == 1, "top_k 1 draw %d picked %d", d, gpt2__sample(l, 6, &s, (uint64_t)d, sc));
    return 0;
}

static int test_sampler_frequencies_follow_softmax(void) {
    enum { V = 5, DRAWS = 40000 };
    float l[V] = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
    gpt2_sampling s;
    memset(&s, 0, sizeof s);
    s.temperature = 0.8f; s.seed = 42;
    gpt2__cand sc[V];
    int cnt[V] = {0};
    for (int d = 0; d < DRAWS; d++) cnt[gpt2__sample(l, V, &s, (uint64_t)d, sc)]++;
    double z = 0, p[V];
    for (int i = 0; i < V; i++) z += exp(l[i] / 0.8);
    for (int i = 0; i < V; i++) {
        p[i] = exp(l[i] / 0.8) / z;
        double sd = sqrt(DRAWS * p[i] * (1 - p[i]));
        EXPECT(fabs(cnt[i] - DRAWS * p[i]) < 5 * sd, "token %d drawn %d times, expected %.0f ± %.0f", i, cnt[i], DRAWS * p[i], 5 * sd);
    }
    return 0;
}

static int test_sampler_top_k_and_top_p_restrict_support(void) {
    enum { V = 8 };
    float l[V] = {3.0f, 1.0f, 2.9f, 0.0f, 2.8f, -1.0f, 1.5f, 0.5f};
    gpt2_sampling s;
    memset(&s, 0, sizeof s);
    s.temperature = 1.0f; s.seed = 7; s.top_k = 3;
    gpt2__cand sc[V];
    for (int d = 0; d < 2000; d++) {
        int t = gpt2__sample(l, V, &s, (uint64_t)d, sc);
        EXPECT(t == 0 || t == 2 || t == 4, "top_k 3 drew token %d (allowed 0, 2, 4)", t);
    }
    s.top_k = 0; s.top_p = 0.5f; /* p(0) ≈ 0.33, p(2) ≈ 0.30: the nucleus is {0, 2} */
    for (int d = 0; d < 2000; d++) {
        int t = gpt2__sample(l, V, &s, (uint64_t)d, sc);
        EXPECT(t == 0 || t == 2, "top_p 0.5 drew token %d (allowed 0, 2)", t);
    }
    return 0;
}

static int test_sampler_depends_on_seed_and_draw_only(void) {
    enum { V = 50 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = (float)((i * 7919) % 13) * 0.3f;
    gpt2_sampling a, b;
    memset(&a, 0, sizeof a);
    a.temperature = 1.2f; a.seed = 99; b = a;
    gpt2__cand sc[V];
    int differ = 0;
    for (int d = 0; d < 200; d++) {
        EXPECT(gpt2__sample(l, V, &a, (uint64_t)d, sc) == gpt2__sample(l, V, &b, (uint64_t)d, sc), "same seed and draw %d gave different tokens", d);
        b.seed = 100;
        differ += gpt2__sample(l, V, &a, (uint64_t)d, sc) != gpt2__sample(l, V, &b, (uint64_t)d, sc);
        b.seed = 99;
    }
    EXPECT(differ > 50, "seeds 99 and 100 agree on %d of 200 draws", 200 - differ);
    return 0;
}

/* ---------------------------------------------------------------- bad input */

typedef struct bad_case { const char *dir; gpt2_status st; const char *names[3]; } bad_case;

static int has_all(const char *msg, const char *const *names) {
    for (int i = 0; i < 3 && names[i]; i++) if (!strstr(msg, names[i])) return 0;
    return 1;
}

static int test_malformed_models_fail_with_a_reason(void) {
    static const bad_case cases[] = {
        {"truncated", GPT2_ERR_FORMAT, {"model.safetensors", NULL}},
        {"header_past_eof", GPT2_ERR_FORMAT, {"model.safetensors", "header length", "file size"}},
        {"header_oversized", GPT2_ERR_FORMAT, {"model.safetensors", "header length", NULL}},
        {"header_not_json", GPT2_ERR_FORMAT, {"model.safetensors", "JSON", NULL}},
        {"tensor_missing", GPT2_ERR_FORMAT, {"h.0.mlp.c_fc.weight", "missing", NULL}},
        {"tensor_wrong_shape", GPT2_ERR_FORMAT, {"h.0.attn.c_attn.weight", "[48, 16]", "[16, 48]"}},
        {"tensor_offsets_outside", GPT2_ERR_FORMAT, {"wte.weight", "outside", NULL}},
        {"tensor_bytes_mismatch", GPT2_ERR_FORMAT, {"wte.weight", NULL}},
        {"dtype_i64", GPT2_ERR_FORMAT, {"wte.weight", "I64", NULL}},
        {"config_bad_json", GPT2_ERR_FORMAT, {"config.json", "JSON", NULL}},
        {"config_missing_n_embd", GPT2_ERR_FORMAT, {"config.json", "n_embd", NULL}},
        {"config_n_embd_not_divisible", GPT2_ERR_FORMAT, {"n_embd", "n_head", NULL}},
        {"config_n_head_zero", GPT2_ERR_FORMAT, {"n_head", "0", NULL}},
        {"config_absurd_n_layer", GPT2_ERR_FORMAT, {"n_layer", NULL}},
        {"config_vocab_mismatch", GPT2_ERR_FORMAT, {"wte.weight", "[60, 16]", "[50, 16]"}},
        {"config_activation_function_silu", GPT2_ERR_FORMAT, {"config.json", "activation_function", "silu"}},
        {"config_add_cross_attention_true", GPT2_ERR_FORMAT, {"config.json", "add_cross_attention", NULL}},
    };
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CPU;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/bad/%s", cases[i].dir);
        gpt2_model *m = (gpt2_model *)&o; /* must come back NULL */
        gpt2_status st = gpt2_load(&m, dir, &o);
        EXPECT(st == cases[i].st, "%s: status %d, expected %d (message: %s)", dir, st, cases[i].st, gpt2_last_error());
        EXPECT(m == NULL, "%s: *model not NULL after a failed load", dir);
        EXPECT(has_all(gpt2_last_error(), cases[i].names), "%s: message \"%s\" does not name %s %s %s", dir, gpt2_last_error(),
               cases[i].names[0], cases[i].names[1] ? cases[i].names[1] : "", cases[i].names[2] ? cases[i].names[2] : "");
    }
    return 0;
}

static int test_missing_path_names_the_file(void) {
    gpt2_model *m;
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CPU;
    EXPECT(gpt2_load(&m, "tests/no_such_model", &o) == GPT2_ERR_IO, "status %d", 0);
    EXPECT(strstr(gpt2_last_error(), "tests/no_such_model"), "message \"%s\" does not name the path", gpt2_last_error());
    EXPECT(gpt2_load(&m, NULL, &o) == GPT2_ERR_ARG, "NULL path accepted");
    EXPECT(gpt2_load(NULL, "tests/models/micro_f32", &o) == GPT2_ERR_ARG, "NULL model pointer accepted");
    return 0;
}

static int test_bad_arguments_are_rejected(void) {
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CPU;
    gpt2_model *m;
    EXPECT(gpt2_load(&m, "tests/models/micro_f32", &o) == GPT2_OK, "%s", gpt2_last_error());
    gpt2_config c = gpt2_model_config(m);
    int tok[64] = {0};
    float *logits = (float *)malloc((size_t)64 * c.n_vocab * sizeof(float));
    tok[3] = c.n_vocab;
    EXPECT(gpt2_forward(m, tok, 1, 8, logits) == GPT2_ERR_ARG && strstr(gpt2_last_error(), "tokens[3]"),
           "out-of-vocab id: %s", gpt2_last_error());
    tok[3] = -1;
    EXPECT(gpt2_forward(m, tok, 1, 8, logits) == GPT2_ERR_ARG, "negative id accepted");
    tok[3] = 0;
    EXPECT(gpt2_forward(m, tok, 1, c.n_ctx + 1, logits) == GPT2_ERR_ARG && strstr(gpt2_last_error(), "max_seq"),
           "T > n_ctx: %s", gpt2_last_error());
    EXPECT(gpt2_forward(m, tok, 0, 4, logits) == GPT2_ERR_ARG, "B = 0 accepted");
    int out[64];
    gpt2_request r;
    memset(&r, 0, sizeof r);
    r.prompt = tok; r.prompt_len = c.n_ctx - 2; r.max_new_tokens = 3; r.out = out; r.stop_token = -1;
    EXPECT(gpt2_generate(m, &r, 1, NULL, NULL) == GPT2_ERR_ARG && strstr(gpt2_last_error(), "max_seq"),
           "prompt + new tokens > n_ctx: %s", gpt2_last_error());
    r.prompt_len = 0;
    EXPECT(gpt2_generate(m, &r, 1, NULL, NULL) == GPT2_ERR_ARG, "empty prompt accepted");
    r.prompt_len = 2; r.out = NULL;
    EXPECT(gpt2_generate(m, &r, 1, NULL, NULL) == GPT2_ERR_ARG, "NULL out accepted");
    free(logits);
    gpt2_free(m);
    o.max_seq = c.n_ctx + 1;
    EXPECT(gpt2_load(&m, "tests/models/micro_f32", &o) == GPT2_ERR_ARG && strstr(gpt2_last_error(), "max_seq"),
           "max_seq > n_ctx: %s", gpt2_last_error());
    o.max_seq = 0;
    const int bad_steps[2] = {-1, 262145};
    for (int i = 0; i < 2; i++) {
        o.step_tokens = bad_steps[i];
        EXPECT(gpt2_load(&m, "tests/models/micro_f32", &o) == GPT2_ERR_ARG && strstr(gpt2_last_error(), "options.step_tokens"),
               "step_tokens %d: %s", o.step_tokens, gpt2_last_error());
    }
    o.step_tokens = 0;
    o.dtype = (gpt2_dtype)(GPT2_DTYPE_BF16 + 1);
    EXPECT(gpt2_load(&m, "tests/models/micro_f32", &o) == GPT2_ERR_ARG && strstr(gpt2_last_error(), "dtype"),
           "dtype %d: %s", (int)o.dtype, gpt2_last_error());
#if !GPT2__CUDA
    o.dtype = GPT2_DTYPE_AUTO;
    o.backend = GPT2_BACKEND_CUDA;
    EXPECT(gpt2_load(&m, "tests/models/micro_f32", &o) == GPT2_ERR_DEVICE && strstr(gpt2_last_error(), "without CUDA"),
           "CUDA on a CPU-only build: %s", gpt2_last_error());
#endif
    return 0;
}

/* issue 7's corruption sweep: every fixture cut at 64 lengths and with bytes flipped at 64 seeded
   places either fails to load with a reason or loads and runs; never a crash or a hang. */
static int test_corrupted_files_fail_or_run(void) {
    char dirs[64][256];
    int nd = fixture_dirs(dirs, 64);
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CPU;
    o.max_batch = 1;
    int loaded = 0, failed = 0;
    for (int f = 0; f < nd; f++) {
        if (!strcmp(dirs[f], "weights")) continue; /* the big one: the small fixtures cover the format */
        char cpath[600], spath[600], *cfg, *st;
        size_t clen, slen;
        snprintf(cpath, sizeof cpath, "%.255s/config.json", dirs[f]);
        snprintf(spath, sizeof spath, "%.255s/model.safetensors", dirs[f]);
        EXPECT(!gpt2__read_file(cpath, &cfg, &clen) && !gpt2__read_file(spath, &st, &slen), "%s: %s", dirs[f], gpt2_last_error());
        unsigned char *bad = (unsigned char *)malloc(slen);
        for (int k = 0; k < 128; k++) {
            size_t len = slen;
            memcpy(bad, st, slen);
            if (k < 64) len = slen * (size_t)k / 64;
            else for (int b = 0; b < 4; b++) bad[gpt2__mix64((uint64_t)k * 4 + b) % slen] ^= (unsigned char)(1u << (k % 8));
            gpt2_model *m = NULL;
            gpt2_status s = gpt2__load_memory(&m, cfg, clen, cpath, bad, len, spath, &o);
            if (s == GPT2_OK) {
                int tok[4] = {0, 1, 2, 3};
                float *lg = (float *)malloc((size_t)4 * m->cfg.n_vocab * sizeof(float));
                gpt2_forward(m, tok, 1, 4, lg);
                free(lg);
                gpt2_free(m);
                loaded++;
            } else {
                EXPECT(m == NULL && gpt2_last_error()[0], "%s variant %d: failed without a message", dirs[f], k);
                failed++;
            }
        }
        free(bad); free(cfg); free(st);
    }
    printf("    %d corrupted variants rejected with a reason, %d loaded and ran\n", failed, loaded);
    EXPECT(failed > 0, "no corrupted variant was rejected");
    return 0;
}


/* the README shows examples/hello.c, which make test compiles and runs: they must be the same text */
static int test_readme_example_is_examples_hello_c(void) {
    char *readme, *hello;
    size_t rl, hl;
    EXPECT(!gpt2__read_file("README.md", &readme, &rl), "%s", gpt2_last_error());
    EXPECT(!gpt2__read_file("examples/hello.c", &hello, &hl), "%s", gpt2_last_error());
    const char *start = strstr(readme, "```c\n");
    EXPECT(start, "README.md has no ```c block");
    start += 5;
    const char *end = strstr(start, "```\n");
    EXPECT(end, "README.md's ```c block is not closed");
    size_t n = (size_t)(end - start), i = 0;
    while (i < n && i < hl && start[i] == hello[i]) i++;
    EXPECT(n == hl && i == n, "README.md's example and examples/hello.c differ at byte %zu (lengths %zu and %zu)", i, n, hl);
    free(readme); free(hello);
    return 0;
}


/* issue 7: a KV cache larger than the machine's memory is refused at load, saying how much was asked
   and how much there is (with overcommit, malloc alone would succeed and the process die later) */
static int test_kv_cache_beyond_memory_is_oom(void) {
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CPU;
    o.max_batch = 65536; /* bf16_prefixed_long: 2 layers x 1040 positions x 128 wide: 2.1 MB a sequence */
    double total, avail;
    gpt2__host_memory(&total, &avail);
    if (total <= 0 || total > 2.0 * 2 * 1040 * 128 * 4.0 * o.max_batch) return SKIP; /* it would fit here */
    gpt2_model *m;
    gpt2_status st = gpt2_load(&m, "tests/models/bf16_prefixed_long", &o);
    EXPECT(st == GPT2_ERR_OOM, "status %d, expected GPT2_ERR_OOM (message: %s)", st, gpt2_last_error());
    EXPECT(strstr(gpt2_last_error(), "MB") && strstr(gpt2_last_error(), "free") && strstr(gpt2_last_error(), "max_batch"),
           "message \"%s\" does not say what was asked, what is free and what to lower", gpt2_last_error());
    return 0;
}

/* a NaN logit (NaN weights load and run) is never drawn, and greedy skips it */
static int test_sampler_never_draws_nan(void) {
    float l[5] = {NAN, 1.0f, NAN, 0.5f, 0.0f};
    gpt2_sampling s;
    memset(&s, 0, sizeof s);
    gpt2__cand sc[5];
    EXPECT(gpt2__sample(l, 5, &s, 0, sc) == 1, "greedy picked %d, expected 1", gpt2__sample(l, 5, &s, 0, sc));
    s.temperature = 1.0f; s.seed = 3;
    for (int d = 0; d < 500; d++) {
        int t = gpt2__sample(l, 5, &s, (uint64_t)d, sc);
        EXPECT(t == 1 || t == 3 || t == 4, "draw %d picked token %d, whose logit is NaN", d, t);
        s.top_k = d % 3; s.top_p = (d % 4) * 0.3f;
    }
    return 0;
}


/* issue 8: requests that end at every step (max_new_tokens 1..N, and stop tokens) hand their slots on,
   and each request's tokens equal what it generates alone */
static int test_requests_ending_at_every_step_match_single_runs(void) {
    gpt2_options o = test_options();
    if (backend_unavailable(&o)) return SKIP;
    enum { N = 12 };
    o.max_batch = 3;
    gpt2_model *m;
    EXPECT(gpt2_load(&m, "tests/models/f32_bare_buffers", &o) == GPT2_OK, "%s", gpt2_last_error());
    int V = gpt2_model_config(m).n_vocab, prompts[N][8], outs[N][16], alone[16];
    gpt2_request r[N];
    for (int i = 0; i < N; i++) {
        memset(&r[i], 0, sizeof r[i]);
        for (int t = 0; t < 8; t++) prompts[i][t] = (int)(gpt2__mix64((uint64_t)i * 31 + t) % (uint64_t)V);
        r[i].prompt = prompts[i]; r[i].prompt_len = 1 + i % 8;
        r[i].max_new_tokens = i + 1; r[i].out = outs[i];
        r[i].stop_token = i % 4 == 3 ? (int)(gpt2__mix64((uint64_t)i) % (uint64_t)V) : -1;
        r[i].sampling.temperature = i % 2 ? 0.9f : 0.0f; r[i].sampling.seed = 77 + i;
    }
    EXPECT(gpt2_generate(m, r, N, NULL, NULL) == GPT2_OK, "%s", gpt2_last_error());
    for (int i = 0; i < N; i++) {
        gpt2_request one = r[i];
        one.out = alone;
        EXPECT(gpt2_generate(m, &one, 1, NULL, NULL) == GPT2_OK, "%s", gpt2_last_error());
        EXPECT(one.n_out == r[i].n_out, "request %d: %d tokens in the batch, %d alone", i, r[i].n_out, one.n_out);
        for (int t = 0; t < one.n_out; t++)
            EXPECT(alone[t] == outs[i][t], "request %d token %d: %d in the batch, %d alone", i, t, outs[i][t], alone[t]);
        EXPECT(r[i].n_out == r[i].max_new_tokens || outs[i][r[i].n_out - 1] == r[i].stop_token,
               "request %d ended after %d of %d tokens without its stop token", i, r[i].n_out, r[i].max_new_tokens);
    }
    gpt2_free(m);
    return 0;
}

/* Speculation (gpt2_generate feeding prompt-lookup drafts beside a request's last token, gpt2_model.spec) changes no
   token and no callback: the embedded model over prompts that repeat (drafts made, some kept, some not), greedy and
   sampled, stop tokens and callbacks ending requests inside a draft, more requests than slots, on one slot and on
   three; against the same model with speculation off. */
typedef struct spec_log { int n, req[4096], tok[4096], cut[16], seen[16]; } spec_log;
/* 0 when request i of a (speculation on) made the tokens it made in b (off); what: the case, for the message */
static int spec_same_tokens(const gpt2_request *a, const gpt2_request *b, int i, const char *what) {
    EXPECT(a->n_out == b->n_out, "%s, request %d: %d tokens with speculation, %d without", what, i, a->n_out, b->n_out);
    for (int t = 0; t < a->n_out; t++)
        EXPECT(a->out[t] == b->out[t], "%s, request %d, token %d: %d with speculation, %d without", what, i, t, a->out[t], b->out[t]);
    return 0;
}
static int spec_log_token(void *user, int req, int tok) {
    spec_log *lg = (spec_log *)user;
    if (lg->n < 4096) { lg->req[lg->n] = req; lg->tok[lg->n] = tok; lg->n++; }
    return ++lg->seen[req] == lg->cut[req];
}
static int test_speculation_changes_no_token(void) {
    gpt2_options o = test_options();
    if (backend_unavailable(&o)) return SKIP;
    gpt2_tokenizer *tk;
    EXPECT(gpt2_tokenizer_load(&tk, "weights") == GPT2_OK, "%s", gpt2_last_error());
    static const char *const texts[4] = {
        "To be, or not to be, that is the question. To be, or not to be, that is the question. To be, or not",
        "KING RICHARD III:\nNow is the winter of our discontent\nKING RICHARD III:\nNow is the winter",
        "ROMEO:\nO Romeo, Romeo! wherefore art thou Romeo?\nJULIET:\nO Romeo, Romeo! wherefore",
        "And the king said, and the king said, and the"};
    enum { N = 12, NEW = 40, CAP = 128 };
    static int prompts[N][CAP], outs[2][N][NEW];
    int plen[N], comma = -1;
    for (int i = 0; i < N; i++) {
        plen[i] = gpt2_encode(tk, texts[i % 4], strlen(texts[i % 4]), prompts[i], CAP);
        EXPECT(plen[i] > 8 && plen[i] <= CAP, "text %d: %d tokens", i % 4, plen[i]);
        plen[i] -= i / 4; /* the same texts cut at other places */
    }
    EXPECT(gpt2_encode(tk, ",", 1, &comma, 1) == 1, "',' is not one token");
    static spec_log lg[2];
    for (int mb = 1; mb <= 3; mb += 2) {
        o.max_batch = mb;
        gpt2_model *m;
        EXPECT(gpt2_load(&m, "weights", &o) == GPT2_OK, "%s", gpt2_last_error());
        gpt2_request r[2][N];
        for (int k = 0; k < 2; k++) {
            m->spec = k ? 0 : 6;
            memset(&lg[k], 0, sizeof lg[k]);
            for (int i = 0; i < N; i++) {
                gpt2_request *q = &r[k][i];
                memset(q, 0, sizeof *q);
                q->prompt = prompts[i]; q->prompt_len = plen[i]; q->max_new_tokens = NEW - i; q->out = outs[k][i];
                q->stop_token = i % 5 == 4 ? comma : -1;
                if (i % 3 == 1) { q->sampling.temperature = 0.8f; q->sampling.seed = (uint64_t)i; }
                if (i % 3 == 2) { q->sampling.temperature = 1.2f; q->sampling.top_k = 4; q->sampling.seed = 7u * (uint64_t)i; }
                lg[k].cut[i] = i % 4 == 1 ? 3 + i : 0;
            }
            const long long rows0 = m->spec_rows, kept0 = m->spec_kept;
            EXPECT(gpt2_generate(m, r[k], N, spec_log_token, &lg[k]) == GPT2_OK, "max_batch %d, speculation %s: %s", mb,
                   k ? "off" : "on", gpt2_last_error());
            if (k == 0) {
                const long long rows = m->spec_rows - rows0, kept = m->spec_kept - kept0;
                EXPECT(kept > 0 && rows > kept, "max_batch %d: %lld draft rows, %lld kept: the test needs some of each", mb, rows, kept);
            } else EXPECT(m->spec_rows == rows0, "speculation off fed %lld draft rows", m->spec_rows - rows0);
        }
        char what[32];
        snprintf(what, sizeof what, "max_batch %d", mb);
        for (int i = 0; i < N; i++) {
            if (spec_same_tokens(&r[0][i], &r[1][i], i, what)) return 1;
            /* the callbacks: the same tokens per request in the same order */
            for (int a = 0, b = 0;; a++, b++) {
                while (a < lg[0].n && lg[0].req[a] != i) a++;
                while (b < lg[1].n && lg[1].req[b] != i) b++;
                EXPECT((a < lg[0].n) == (b < lg[1].n), "max_batch %d, request %d: callbacks differ in number", mb, i);
                if (a >= lg[0].n) break;
                EXPECT(lg[0].tok[a] == lg[1].tok[b], "max_batch %d, request %d: callbacks differ", mb, i);
            }
        }
        gpt2_free(m);
    }
    gpt2_tokenizer_free(tk);
    return 0;
}

/* Speculation changes no token over random requests: prompts that repeat short patterns of a few token ids (so
   drafts are made often), random lengths up to the context, greedy and sampled (temperature, top-k), stop tokens,
   1 to 5 slots, at most 1 to 12 draft tokens; against the same model with speculation off. */
static int test_speculation_matches_on_random_requests(void) {
    gpt2_options o = test_options();
    if (backend_unavailable(&o)) return SKIP;
    long long rows = 0, kept = 0;
    for (int trial = 0; trial < 12; trial++) {
        o.max_batch = 1 + trial % 5;
        gpt2_model *m;
        EXPECT(gpt2_load(&m, "tests/models/f32_bare_buffers", &o) == GPT2_OK, "%s", gpt2_last_error());
        const int V = gpt2_model_config(m).n_vocab, S = gpt2_model_max_seq(m), ids = V < 6 ? V : 6;
        enum { N = 9, CAP = 1024 };
        EXPECT(S <= CAP, "max_seq %d", S);
        static int prompts[N][CAP], outs[2][N][CAP];
        gpt2_request r[2][N];
        const uint64_t x = 1234 + (uint64_t)trial;
        for (int k = 0; k < 2; k++) {
            m->spec = k ? 0 : 1 + trial % 12;
            for (int i = 0; i < N; i++) {
                const int plen = 1 + (int)(gpt2__mix64(x + i) % (uint64_t)(S / 2)), per = 1 + (int)(gpt2__mix64(x + 100 + i) % 5);
                for (int t = 0; t < plen; t++) prompts[i][t] = (int)(gpt2__mix64(x * 7 + i * 31 + t % per) % (uint64_t)ids);
                gpt2_request *q = &r[k][i];
                memset(q, 0, sizeof *q);
                q->prompt = prompts[i]; q->prompt_len = plen; q->out = outs[k][i];
                q->max_new_tokens = (int)(gpt2__mix64(x + 200 + i) % (uint64_t)(S - plen));
                q->stop_token = i % 4 == 3 ? (int)(gpt2__mix64(x + i) % (uint64_t)ids) : -1;
                if (i % 3) { q->sampling.temperature = 0.5f + 0.2f * (i % 4); q->sampling.seed = x + i; q->sampling.top_k = i % 2 ? 3 : 0; }
            }
            const long long r0 = m->spec_rows, k0 = m->spec_kept;
            EXPECT(gpt2_generate(m, r[k], N, NULL, NULL) == GPT2_OK, "trial %d: %s", trial, gpt2_last_error());
            if (!k) { rows += m->spec_rows - r0; kept += m->spec_kept - k0; }
        }
        char what[32];
        snprintf(what, sizeof what, "trial %d", trial);
        for (int i = 0; i < N; i++)
            if (spec_same_tokens(&r[0][i], &r[1][i], i, what)) return 1;
        gpt2_free(m);
    }
    EXPECT(kept > 0 && rows > kept, "%lld draft rows, %lld kept: the test needs some of each", rows, kept);
    return 0;
}

/* A step's logits (each sequence's last fed row, [n][V]) on the model's backend; with gather 0 on CUDA, the step runs
   its last layer on every fed row (gpt2__cuda_state.gather); 0 on success */
static int step_logits(gpt2_model *m, const gpt2__seq *seqs, int n, float *logits, int gather) {
#if GPT2__CUDA
    if (m->cuda) {
        const int V = m->cfg.n_vocab;
        gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
        int next[16];
        S->gather = gather ? 1 : 0;
        if (n > 16 || gpt2__cuda_step(m, seqs, n, next) != GPT2_OK) return 1;
        return cudaMemcpy2D(logits, (size_t)V * 4, S->logits, (size_t)S->ldv * 4, (size_t)V * 4, (size_t)n,
                            cudaMemcpyDeviceToHost) != cudaSuccess;
    }
#endif
    (void)gather;
    return gpt2__cpu_run(m, seqs, n, 0, logits) != GPT2_OK;
}

/* Only each sequence's last row needs its logits, so a step may run its last layer on those rows alone (after every
   row's K and V are stored); a row's logits keep their bits. Two steps: four prompts (1..70 rows), then two prompts
   interleaved with decode rows of two sequences of the first step. A prompt's logits equal gpt2_forward's at its last
   row bit for bit; on the CPU so do the decode rows' (forward over prompt + token), and on CUDA every logit equals
   the step's with its last layer on every fed row. */
static int test_step_logits_are_forwards_last_rows(void) {
    gpt2_options o = test_options();
    if (backend_unavailable(&o)) return SKIP;
    const char *dirs[2] = {"tests/models/bf16_prefixed_long", "tests/models/f16_prefixed_lmhead"};
    for (int di = 0; di < 2; di++) {
        o.max_batch = 6;
        /* (gpt2_forward stores into the cache of slot 0, so it runs on a model of its own) */
        gpt2_model *m, *fm, *ref = NULL;
        EXPECT(gpt2_load(&m, dirs[di], &o) == GPT2_OK, "%s: %s", dirs[di], gpt2_last_error());
        EXPECT(gpt2_load(&fm, dirs[di], &o) == GPT2_OK, "%s: %s", dirs[di], gpt2_last_error());
        if (m->cuda) EXPECT(gpt2_load(&ref, dirs[di], &o) == GPT2_OK, "%s: %s", dirs[di], gpt2_last_error());
        const int V = m->cfg.n_vocab;
        enum { NS = 4 };
        /* step 0: slots 0-3; step 1: slot 4's prompt, slot 0's next token, slot 5's prompt, slot 2's next token */
        const int lens[2][NS] = {{1, 9, 40, 70}, {50, 1, 33, 1}}, slots[2][NS] = {{0, 1, 2, 3}, {4, 0, 5, 2}};
        int toks[6][72];
        for (int sl = 0; sl < 6; sl++)
            for (int t = 0; t < 72; t++) toks[sl][t] = (int)(gpt2__mix64((uint64_t)sl * 131 + t) % (uint64_t)V);
        float *lg = (float *)malloc((size_t)NS * V * 4), *lr = (float *)malloc((size_t)NS * V * 4);
        float *fw = (float *)malloc((size_t)72 * V * 4);
        int fed[6] = {0};
        for (int step = 0; step < 2; step++) {
            gpt2__seq q[NS];
            memset(q, 0, sizeof q);
            for (int i = 0; i < NS; i++) {
                const int sl = slots[step][i], decode = step == 1 && fed[sl] > 0;
                q[i].slot = sl; q[i].pos = fed[sl]; q[i].n_tok = lens[step][i]; q[i].prompt = !decode; q[i].sample = 1;
                q[i].tok = toks[sl] + fed[sl];
            }
            EXPECT(!step_logits(m, q, NS, lg, 1), "%s step %d: %s", dirs[di], step, gpt2_last_error());
            if (ref) EXPECT(!step_logits(ref, q, NS, lr, 0), "%s step %d: %s", dirs[di], step, gpt2_last_error());
            for (int i = 0; i < NS; i++) {
                const int sl = slots[step][i], T = fed[sl] + lens[step][i];
                const float *row = lg + (size_t)i * V;
                int bad = 0;
                for (int v = 0; v < V; v++) bad |= !isfinite(row[v]);
                EXPECT(!bad, "%s step %d sequence %d: a logit is not finite", dirs[di], step, i);
                if (ref) EXPECT(!memcmp(row, lr + (size_t)i * V, (size_t)V * 4), "%s step %d sequence %d (slot %d, %d rows): its "
                                "logits differ from the step's with the last layer on every row", dirs[di], step, i, sl, lens[step][i]);
                if (!q[i].prompt && m->cuda) continue; /* a decode row rounds unlike a prompt row on CUDA */
                EXPECT(gpt2_forward(fm, toks[sl], 1, T, fw) == GPT2_OK, "%s: %s", dirs[di], gpt2_last_error());
                EXPECT(!memcmp(row, fw + (size_t)(T - 1) * V, (size_t)V * 4), "%s step %d sequence %d (slot %d, positions "
                       "%d..%d): its logits differ from gpt2_forward's at position %d", dirs[di], step, i, sl, fed[sl], T - 1, T - 1);
            }
            for (int i = 0; i < NS; i++) fed[slots[step][i]] += lens[step][i];
        }
        free(lg); free(lr); free(fw);
        gpt2_free(m);
        gpt2_free(fm);
        gpt2_free(ref);
    }
    return 0;
}

static const test_case model_tests[] = {
    {"logits_match_reference", test_logits_match_reference},
    {"greedy_continuation_matches_reference", test_greedy_continuation_matches_reference},
    {"outputs_independent_of_max_batch", test_outputs_independent_of_max_batch},
    {"generate_agrees_with_forward", test_generate_agrees_with_forward},
    {"callback_and_stop_token_end_requests", test_callback_and_stop_token_end_requests},
    {"requests_ending_at_every_step_match_single_runs", test_requests_ending_at_every_step_match_single_runs},
    {"speculation_changes_no_token", test_speculation_changes_no_token},
    {"speculation_matches_on_random_requests", test_speculation_matches_on_random_requests},
    {"step_logits_are_forwards_last_rows", test_step_logits_are_forwards_last_rows},
    {"sampler_greedy_takes_lowest_index_on_ties", test_sampler_greedy_takes_lowest_index_on_ties},
    {"sampler_frequencies_follow_softmax", test_sampler_frequencies_follow_softmax},
    {"sampler_top_k_and_top_p_restrict_support", test_sampler_top_k_and_top_p_restrict_support},
    {"sampler_depends_on_seed_and_draw_only", test_sampler_depends_on_seed_and_draw_only},
    {"malformed_models_fail_with_a_reason", test_malformed_models_fail_with_a_reason},
    {"missing_path_names_the_file", test_missing_path_names_the_file},
    {"bad_arguments_are_rejected", test_bad_arguments_are_rejected},
    {"corrupted_files_fail_or_run", test_corrupted_files_fail_or_run},
    {"readme_example_is_examples_hello_c", test_readme_example_is_examples_hello_c},
    {"kv_cache_beyond_memory_is_oom", test_kv_cache_beyond_memory_is_oom},
    {"sampler_never_draws_nan", test_sampler_never_draws_nan},
    {NULL, NULL}};

#include "tests/tokenizer_tests.inc"
#include "tests/cuda_tests.inc"
#include "tests/mpi_tests.inc"
#include "tests/family_tests.inc"
#include "tests/ckpt_tests.inc"
#include "tests/score_tests.inc"
#include "tests/engine_tests.inc"
#include "tests/generate_tests.inc"
#include "tests/demo_tests.inc"

static const test_case *const test_groups[] = { model_tests, family_tests, ckpt_tests, score_tests, engine_tests, generate_tests, demo_tests, tokenizer_tests, cuda_tests, mpi_tests };

int main(int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0;
    for (size_t g = 0; g < sizeof test_groups / sizeof test_groups[0]; g++) {
        for (const test_case *t = test_groups[g]; t->name; t++) {
            /* arguments: run the tests whose names contain one (all when none); -TEXT leaves out those containing TEXT */
            int selected = 1, excluded = 0;
            for (int a = 1; a < argc; a++) if (argv[a][0] != '-') selected = 0;
            for (int a = 1; a < argc; a++) {
                if (argv[a][0] == '-') excluded |= strstr(t->name, argv[a] + 1) != NULL;
                else if (strstr(t->name, argv[a])) selected = 1;
            }
            if (!selected || excluded) continue;
            fflush(stdout);
            int r = t->fn();
            printf("%s %s\n", r == SKIP ? "skip" : r ? "FAIL" : "ok  ", t->name);
            if (r == SKIP) skipped++; else if (r) failed++; else passed++;
        }
    }
    if (skipped) printf("%d skipped (what they need is absent here)\n", skipped);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
