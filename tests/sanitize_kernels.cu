/* tests/sanitize_kernels.cu — gpt2.cuh's few-row decode products, its sampler and scoring's fused product on random
   data, with no cuBLASLt call, for compute-sanitizer (tests/sanitize.sh runs it under racecheck, memcheck and synccheck).

   Why a program of its own: racecheck cannot get past cuBLASLt. Over cuBLASLt's kernels it runs for hours (and
   reports hazards inside them: it does not follow their barriers), and with a kernel filter (`--kernel-name
   kns=gpt2__`, or `--kernel-name-exclude kns=nvjet`) it stops at the first cuBLASLt launch with "Internal Sanitizer
   Error: The Sanitizer failed to handle a hardware exception" (compute-sanitizer 2025.3.1, H100; even
   `./test_gpt2 matmul`, which runs cuBLASLt alone). Every test_gpt2 test of the few-row products or of whole steps
   calls cuBLASLt (gpt2__few_row_check at load, the prompt products), so none of them finishes under racecheck.

   What it launches, each as a decode step does (the products in F16 and BF16, sm_80+; F32's product kernel):
   - gpt2__few_row_kernel through gpt2__few_row_run: the forms a step uses (bias into T; GELU; fp32 K pieces; fp32 in
     one piece, the logits), 1 and 2 warps a block, every row count 1..16, on GPT-2's shapes and odd small ones;
   - the LN-folded form through gpt2__ln_fold_run: widths 768, 1024, 1280, 1600, 2560 (E 1, 2, 4), 1 and 2 rows, with and
     without GELU, in the FIT ring and the full ring;
   - F32's few-row product (gpt2__few_row32_kernel) in its three forms, rows 1..16, checked against the host's fused
     multiply-add chain bit for bit (GELU within 1e-5);
   - the sampler (gpt2__sample_kernel) at vocabularies 1003 and 50257: greedy, top-k, top-p, both, no cut, with and
     without a pure decode step's advance record;
   - scoring's fused product (sm_90a code, F16 and BF16) on three shapes, against the host's log-probabilities and
     ranks;
   and checks what can be checked without cuBLASLt: the two block widths give the same bits, and so do the two
   rings (output and updated residual rows); the sampler picks the CPU's token. Prints one line per group and
   "N checks, N failed". With `few` as the argument: row counts 1, 2, 9 and 16 only, the logits' shape 5000 columns
   wide, one sampler row per rule (racecheck is slow). With `f32`: F32's product alone, every row count and shape as
   in the full run (~520 s under racecheck on the H100, too long for tests/sanitize.sh: run by hand).
   Build: make tests/sanitize_kernels (needs nvcc). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static int checks, failed, few; /* few: row counts 1, 2, 9 and 16 only, the logits' shape narrowed, one sampler row a rule */
static int only32;                 /* f32: F32's product alone */
#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define ST_OK(x)                                                                                   \
    do {                                                                                           \
        gpt2_status s_ = (x);                                                                      \
        if (s_ != GPT2_OK) {                                                                       \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #x, gpt2_last_error());                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
static void expect(int ok, const char *what) {
    checks++;
    if (!ok) { failed++; printf("FAIL %s\n", what); }
}

static uint32_t rng_state = 0x2545F491u;
static float frand(float scale) { /* uniform in [-scale, scale) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return scale * ((float)(rng_state >> 8) / 8388608.0f - 1.0f);
}
template <typename T> static T tof(float f);
template <> __half tof<__half>(float f) { return __float2half(f); }
template <> __nv_bfloat16 tof<__nv_bfloat16>(float f) { return __float2bfloat16(f); }
template <typename T> static T *dev_rand(size_t n, float scale) {
    std::vector<T> h(n);
    for (size_t i = 0; i < n; i++) h[i] = tof<T>(frand(scale));
    T *d = NULL;
    CK(cudaMalloc(&d, n * sizeof(T)));
    CK(cudaMemcpy(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
static float *dev_f(size_t n, float scale, float base) {
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = base + frand(scale);
    float *d = NULL;
    CK(cudaMalloc(&d, n * sizeof(float)));
    CK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}
static int same_bytes(const void *a, const void *b, size_t n) {
    std::vector<unsigned char> x(n), y(n);
    CK(cudaMemcpy(x.data(), a, n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), b, n, cudaMemcpyDeviceToHost));
    return memcmp(x.data(), y.data(), n) == 0;
}

/* Every form of the few-row product on one shape: O outputs, K = I in `splits` pieces (fp32 pieces only) */
template <typename T>
static void skinny_shape(cudaStream_t st, int pdl, const char *dt, int O, int I, int splits) {
    T *W = dev_rand<T>((size_t)O * I, 0.05f), *X = dev_rand<T>((size_t)GPT2__FEW_ROW_MAX * I, 1.0f), *B = dev_rand<T>((size_t)O, 0.5f);
    const size_t bytes = (size_t)splits * GPT2__FEW_ROW_MAX * O * 4;
    void *d1, *d2;
    CK(cudaMalloc(&d1, bytes));
    CK(cudaMalloc(&d2, bytes));
    int launches = 0;
    for (int form = 0; form < 4; form++) { /* bias into T; GELU; fp32 pieces; fp32 one piece (the logits) */
        const int f32 = form >= 2, gelu = form == 1, sp = form == 2 ? splits : 1;
        if (form == 2 && splits == 1) continue;
        if (!gpt2__few_row_fits(O, GPT2__FEW_ROW_MAX, I, sp, 2)) continue;
        for (int n = 1; n <= GPT2__FEW_ROW_MAX; n++) {
            if (few && n != 1 && n != 2 && n != 9 && n != GPT2__FEW_ROW_MAX) continue;
            const size_t nb = (size_t)sp * n * O * (f32 ? 4 : 2);
            CK(cudaMemsetAsync(d1, 0x11, nb, st));
            CK(cudaMemsetAsync(d2, 0x22, nb, st));
            ST_OK((gpt2__few_row_run<T>(st, pdl, d1, W, X, B, O, n, I, f32, 0, sp, gelu ? GPT2__ACT_GELU_TANH : GPT2__ACT_NONE)));
            ST_OK((gpt2__few_row_run<T, GPT2__FEW_ROW_NW_WIDE>(st, pdl, d2, W, X, B, O, n, I, f32, 0, sp, gelu ? GPT2__ACT_GELU_TANH : GPT2__ACT_NONE)));
            CK(cudaStreamSynchronize(st));
            launches += 2;
            char what[160];
            snprintf(what, sizeof what, "%s skinny %dx%d/%d form %d, %d rows: 1 and %d warps a block differ", dt, O, I, sp, form, n,
                     GPT2__FEW_ROW_NW_WIDE);
            expect(same_bytes(d1, d2, nb), what);
        }
    }
    printf("%s skinny %5d x %4d (%d pieces): %d launches\n", dt, O, I, splits, launches);
    cudaFree(W); cudaFree(X); cudaFree(B); cudaFree(d1); cudaFree(d2);
}

/* F32's few-row product (gpt2__few_row32_kernel through gpt2__few_row32_run) on one shape, in each form (bias; bias and
   GELU; fp32 pieces) at 32 and 16 columns a warp: its outputs of the first 256 and the last 32 columns against one fused multiply-add chain per
   output on the host (bit for bit; with GELU within 1e-5, the host's tanhf not being the GPU's) */
static void skinny32_shape(cudaStream_t st, int pdl, int O, int I, int splits) {
    const int R = GPT2__FEW_ROW_MAX;
    std::vector<float> w((size_t)O * I), x((size_t)R * I), b((size_t)O);
    for (auto &v : w) v = frand(0.05f);
    for (auto &v : x) v = frand(1.0f);
    for (auto &v : b) v = frand(0.5f);
    float *W, *X, *B, *D;
    CK(cudaMalloc(&W, w.size() * 4)); CK(cudaMalloc(&X, x.size() * 4)); CK(cudaMalloc(&B, b.size() * 4));
    CK(cudaMalloc(&D, (size_t)splits * R * O * 4));
    CK(cudaMemcpy(W, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(X, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    int launches = 0;
    for (int form = 0; form < 3; form++) { /* bias; bias and GELU; fp32 pieces */
        const int sp = form == 2 ? splits : 1, Ik = I / sp;
        if ((form == 2 && splits == 1) || !gpt2__few_row32_fits(O, R, I, sp)) continue;
        for (int n = 1, cols = 32; n <= R; cols = cols == 32 ? 16 : 32, n += cols == 32) { /* 32 and 16 columns a warp */
            if (few && n != 1 && n != 2 && n != 9 && n != R) continue;
            const size_t nb = (size_t)sp * n * O;
            CK(cudaMemsetAsync(D, 0x11, nb * 4, st));
            ST_OK(gpt2__few_row32_run(st, pdl, D, W, X, form == 2 ? NULL : B, O, n, I, 0, sp, form == 1 ? GPT2__ACT_GELU_TANH : GPT2__ACT_NONE, cols));
            CK(cudaStreamSynchronize(st));
            launches++;
            std::vector<float> d(nb);
            CK(cudaMemcpy(d.data(), D, nb * 4, cudaMemcpyDeviceToHost));
            int bad = 0;
            for (int p = 0; p < sp; p++)
                for (int r = 0; r < n; r++)
                    for (int o = 0; o < O; o++) {
                        if (o >= 256 && o < O - 32) continue;
                        float a = 0.0f;
                        for (int k = p * Ik; k < (p + 1) * Ik; k++) a = fmaf(x[(size_t)r * I + k], w[(size_t)o * I + k], a);
                        if (form < 2) a = a + b[o];
                        if (form == 1) gpt2__cpu_activation(&a, 1, GPT2__ACT_GELU_TANH);
                        const float g = d[((size_t)p * n + r) * O + o];
                        bad += form == 1 ? !(fabsf(g - a) <= 1e-5f * (1.0f + fabsf(a))) : memcmp(&g, &a, 4) != 0;
                    }
            char what[160];
            snprintf(what, sizeof what, "F32 skinny %dx%d/%d form %d, %d rows, %d columns a warp: %d outputs differ from the host's chain", O,
                     I, sp, form, n, cols, bad);
            expect(bad == 0, what);
        }
    }
    printf("F32 skinny %5d x %4d (%d pieces): %d launches\n", O, I, splits, launches);
    cudaFree(W); cudaFree(X); cudaFree(B); cudaFree(D);
}

/* The LN-folded product at width C: out O = 3C (qkv) or 4C with GELU (the MLP's first), n rows, the residual rows
   from x + 4 fp32 pieces + bias, in the FIT ring and the full ring */
template <typename T>
static void lnf_width(gpt2__cuda_state *S, const char *dt, int C) {
    const int pieces = 4;
    float *x = dev_f((size_t)GPT2__LN_FOLD_ROWS * C, 1.0f, 0.0f), *part = dev_f((size_t)pieces * GPT2__LN_FOLD_ROWS * C, 0.5f, 0.0f);
    float *g = dev_f((size_t)C, 0.2f, 1.0f), *b = dev_f((size_t)C, 0.2f, 0.0f), *xo[2];
    T *bias = dev_rand<T>((size_t)C, 0.5f);
    int launches = 0;
    for (int gelu = 0; gelu < 2; gelu++) {
        const int O = (gelu ? 4 : 3) * C;
        T *W = dev_rand<T>((size_t)O * C, 0.05f), *B = dev_rand<T>((size_t)O, 0.5f), *D[2];
        for (int i = 0; i < 2; i++) {
            CK(cudaMalloc(&D[i], (size_t)GPT2__LN_FOLD_ROWS * O * sizeof(T)));
            CK(cudaMalloc(&xo[i], (size_t)GPT2__LN_FOLD_ROWS * C * sizeof(float)));
        }
        for (int n = 1; n <= GPT2__LN_FOLD_ROWS; n++) {
            int ran = 0;
            for (int fit = 1; fit >= 0; fit--) {
                S->ln_fold_fit = fit;
                if (gpt2__few_row_smem(n, C, sizeof(T), GPT2__LN_FOLD_NW, GPT2__FEW_ROW_KC, gpt2__ln_fold_ring(S, C)) > (size_t)S->ln_fold_smem) {
                    printf("%s lnf C %d, %d rows, %s ring: does not fit in this GPU's shared memory, skipped\n", dt, C, n, fit ? "FIT" : "full");
                    continue;
                }
                const gpt2__ln_fold<T> f = {x, xo[fit], part, (size_t)n * C, pieces, bias, g, b, 1e-5f};
                CK(cudaMemsetAsync(D[fit], 0x11 * (fit + 1), (size_t)n * O * sizeof(T), S->stream));
                CK(cudaMemsetAsync(xo[fit], 0x11 * (fit + 1), (size_t)n * C * sizeof(float), S->stream));
                const gpt2__lane L = gpt2__lane_of(S);
                ST_OK(gpt2__ln_fold_run<T>(S, &L, D[fit], W, B, O, n, C, gelu ? GPT2__ACT_GELU_TANH : GPT2__ACT_NONE, f));
                CK(cudaStreamSynchronize(S->stream));
                launches++;
                ran++;
            }
            if (ran == 2 && gpt2__ln_fold_stages(C) != GPT2__LN_FOLD_ST) { /* the two rings are different kernels only here */
                char what[160];
                snprintf(what, sizeof what, "%s lnf C %d O %d, %d rows: the FIT and the full ring differ", dt, C, O, n);
                expect(same_bytes(D[0], D[1], (size_t)n * O * sizeof(T)) && same_bytes(xo[0], xo[1], (size_t)n * C * sizeof(float)), what);
            }
        }
        cudaFree(W); cudaFree(B);
        for (int i = 0; i < 2; i++) { cudaFree(D[i]); cudaFree(xo[i]); }
    }
    printf("%s lnf C %4d (ring %d / %d stages): %d launches\n", dt, C, gpt2__ln_fold_stages(C), GPT2__LN_FOLD_ST, launches);
    cudaFree(x); cudaFree(part); cudaFree(g); cudaFree(b); cudaFree(bias);
}

/* The sampler (gpt2__sample_kernel) on one vocabulary: greedy, top-k (within one page and past it), top-p, both, and
   no cut (every page), with and without the step's advance record; each pick checked against the CPU's gpt2__sample.
   few: one row per rule, else three. */
static void sampler_vocab(int V) {
    /* temperature, top_k, top_p, seed; the other controls off */
    const float rule[][4] = {{0.0f, 0, 0.0f, 1},   {1.0f, 0, 0.0f, 2},    {0.9f, 40, 0.0f, 3},  {1.0f, 4096, 0.0f, 4},
                             {1.0f, 4097, 0.3f, 5}, {0.8f, 0, 0.9f, 6},    {1.0f, 50, 0.9f, 7},  {2.0f, 10000, 0.999f, 8}};
    const int nr = (int)(sizeof rule / sizeof rule[0]), per = few ? 1 : 3, n = nr * per;
    gpt2_sampling rules[sizeof rule / sizeof rule[0]];
    for (int i = 0; i < nr; i++) {
        memset(&rules[i], 0, sizeof rules[i]);
        rules[i].temperature = rule[i][0]; rules[i].top_k = (int)rule[i][1]; rules[i].top_p = rule[i][2];
        rules[i].seed = (uint64_t)rule[i][3];
    }
    std::vector<float> logits((size_t)n * V);
    std::vector<gpt2__pick> picks(n);
    for (size_t i = 0; i < logits.size(); i++) logits[i] = 3.0f * frand(1.0f);
    for (int i = 0; i < n; i++) {
        const gpt2_sampling *r = &rules[i % nr];
        memset(&picks[i], 0, sizeof picks[i]);
        picks[i].temperature = r->temperature; picks[i].top_k = r->top_k; picks[i].top_p = r->top_p;
        picks[i].seed = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        picks[i].draw = (uint64_t)i;
        picks[i].sample = 1;
    }
    float *d_logits;
    gpt2__pick *d_picks;
    int *d_next, *d_pos, *d_tok;
    CK(cudaMalloc(&d_logits, logits.size() * 4));
    CK(cudaMalloc(&d_picks, (size_t)n * sizeof(gpt2__pick)));
    CK(cudaMalloc(&d_next, (size_t)n * 4));
    CK(cudaMalloc(&d_pos, (size_t)n * 4));
    CK(cudaMalloc(&d_tok, (size_t)n * 4));
    CK(cudaMemset(d_pos, 0, (size_t)n * 4));
    std::vector<gpt2__cand> scratch(V);
    std::vector<int> got(n);
    for (int form = 0; form < 2; form++) { /* the logits; with the advance record */
        CK(cudaMemcpy(d_logits, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice)); /* the kernel overwrites sampled rows */
        CK(cudaMemcpy(d_picks, picks.data(), (size_t)n * sizeof(gpt2__pick), cudaMemcpyHostToDevice));
        const gpt2__advance adv = {form == 1 ? d_pos : NULL, form == 1 ? d_tok : NULL, NULL, 0};
        gpt2__sample_kernel<<<n, GPT2__SAMPLE_THREADS>>>(d_logits, V, V, d_picks, d_next, adv, 0);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(got.data(), d_next, (size_t)n * 4, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++) {
            gpt2_sampling r = rules[i % nr];
            r.seed = picks[i].seed;
            const int want = gpt2__sample(&logits[(size_t)i * V], V, &r, picks[i].draw, scratch.data());
            char what[160];
            snprintf(what, sizeof what, "sampler V %d form %d row %d (temperature %g, top_k %d, top_p %g): GPU %d, CPU %d", V, form, i,
                     r.temperature, r.top_k, r.top_p, got[i], want);
            expect(got[i] == want, what);
        }
    }
    printf("sampler V %5d: %d rows, 2 forms\n", V, n);
    cudaFree(d_logits); cudaFree(d_picks); cudaFree(d_next); cudaFree(d_pos); cudaFree(d_tok);
}

/* Scoring's fused product (gpt2__cuda_score_fused: gpt2__score_target_kernel, gpt2__score_gemm_kernel,
   gpt2__score_finish_kernel; sm_90a code) on n random rows of width C against a random head of V rows: each row's
   log-probability within 1e-5 (1 + |lp|) of the host's, from the logits in double, and its rank between how many
   logits exceed the target's by more than 1e-5 (1 + max |logit|) and how many come within that of it or above */
template <typename T>
static void score_shape(gpt2__cuda_state *S, const char *dt, int n, int C, int V) {
    static gpt2_model m;
    memset(&m, 0, sizeof m);
    m.cfg.n_embd = C; m.cfg.n_vocab = V; m.dtype = gpt2__cuda_type<T>::id == CUDA_R_16F ? GPT2_DTYPE_F16 : GPT2_DTYPE_BF16;
    int wg = 0; /* the code running was built for sm_90a */
    CK(cudaMemcpyFromSymbol(&wg, gpt2__built_wg, sizeof wg));
    std::vector<T> ln((size_t)n * C), w((size_t)V * C);
    for (auto &e : ln) e = tof<T>(frand(2.0f));
    for (auto &e : w) e = tof<T>(frand(0.1f));
    std::vector<int> tg(n);
    for (int r = 0; r < n; r++) tg[r] = (int)((r * 7919u + 13u) % (unsigned)V);
    T *d_ln, *d_w;
    int *d_tg, *d_rank;
    double *d_lp;
    CK(cudaMalloc(&d_ln, ln.size() * sizeof(T))); CK(cudaMalloc(&d_w, w.size() * sizeof(T)));
    CK(cudaMalloc(&d_tg, n * sizeof(int))); CK(cudaMalloc(&d_rank, n * sizeof(int))); CK(cudaMalloc(&d_lp, n * sizeof(double)));
    CK(cudaMemcpy(d_ln, ln.data(), ln.size() * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_w, w.data(), w.size() * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_tg, tg.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    S->lm_head = d_w;
    S->ldv = (V + 7) & ~7;
    S->logit_rows = n; /* the buffer of the tiles' sums: as the engine sizes it, at least n rows of ldv floats */
    CK(cudaMalloc(&S->logits, (size_t)S->logit_rows * S->ldv * sizeof(float)));
    if (!wg) printf("%s score: not built for sm_90a here: the fused product does not run\n", dt);
    else if (!gpt2__score_enable<T>(&m, S, wg)) {
        printf("%s score: the fused product cannot run here (a driver that encodes tensor maps)\n", dt);
        expect(0, "fused score enabled");
    } else {
        gpt2__lane L = gpt2__lane_of(S);
        ST_OK((gpt2__cuda_score_fused<T>(&m, S, &L, d_ln, n, d_tg, d_lp, d_rank)));
        CK(cudaStreamSynchronize(S->stream));
        std::vector<double> lp(n);
        std::vector<int> rank(n);
        CK(cudaMemcpy(lp.data(), d_lp, n * sizeof(double), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(rank.data(), d_rank, n * sizeof(int), cudaMemcpyDeviceToHost));
        std::vector<double> lg(V);
        int bad = 0;
        for (int r = 0; r < n; r++) {
            double mx = -INFINITY, ma = 0, sum = 0;
            for (int v = 0; v < V; v++) {
                double a = 0;
                for (int k = 0; k < C; k++) a += (double)(float)ln[(size_t)r * C + k] * (double)(float)w[(size_t)v * C + k];
                lg[v] = a;
                mx = a > mx ? a : mx;
                ma = fabs(a) > ma ? fabs(a) : ma;
            }
            for (int v = 0; v < V; v++) sum += exp(lg[v] - mx);
            const double want = lg[tg[r]] - mx - log(sum), eps = 1e-5 * (1 + ma);
            int lo = 0, hi = 0;
            for (int v = 0; v < V; v++)
                if (v != tg[r]) lo += lg[v] > lg[tg[r]] + eps, hi += lg[v] >= lg[tg[r]] - eps;
            if (fabs(lp[r] - want) > 1e-5 * (1 + fabs(want)) || rank[r] < lo || rank[r] > hi) {
                if (bad++ < 3) printf("  row %d: log-probability %.9f rank %d, host %.9f ranks %d..%d\n", r, lp[r], rank[r], want, lo, hi);
            }
        }
        char what[160];
        snprintf(what, sizeof what, "%s score %d rows x %d against %d: %d rows off the host's", dt, n, C, V, bad);
        expect(bad == 0, what);
        printf("%s score %4d rows x %4d against %5d\n", dt, n, C, V);
    }
    cudaFree(d_ln); cudaFree(d_w); cudaFree(d_tg); cudaFree(d_rank); cudaFree(d_lp); cudaFree(S->logits);
    S->logits = NULL;
}

template <typename T>
static void run_dtype(gpt2__cuda_state *S, const char *dt) {
    /* scoring's fused product: a head narrower than a tile, K below a slice; GPT-2's 768 against a cut vocabulary (the
       whole one without few); rows past a pair of tiles */
    score_shape<T>(S, dt, 70, 32, 109);
    score_shape<T>(S, dt, few ? 65 : 130, 768, few ? 5000 : 50257);
    score_shape<T>(S, dt, 200, 1600, 1031);
    if (!gpt2__few_row_enable<T>() || !gpt2__few_row_enable<T, GPT2__FEW_ROW_NW_WIDE>()) {
        printf("%s: gpt2__few_row_kernel cannot run on this GPU (sm_80+ code needed)\n", dt);
        expect(0, "skinny kernel enabled");
        return;
    }
    const int shapes[][3] = {{2304, 768, 1}, {768, 768, 2},   {3072, 768, 1}, {768, 3072, 4}, {50264, 768, 1},
                             {4800, 1600, 1}, {1600, 1600, 4}, {1600, 6400, 4}, {288, 96, 1},  {1000, 400, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) /* few: the logits' 50264 columns as 5000 (the same code, fewer blocks) */
        skinny_shape<T>(S->stream, S->pdl, dt, few && shapes[i][0] > 5000 ? 5000 : shapes[i][0], shapes[i][1], shapes[i][2]);
    if (!gpt2__ln_fold_enable<T>(S)) {
        printf("%s: the LN-folded products cannot run on this GPU (too little shared memory a block)\n", dt);
        return;
    }
    const int widths[] = {768, 1024, 1280, 1600, 2560};
    for (int C : widths) lnf_width<T>(S, dt, C);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows in a log even when a sanitizer run is cut off */
    few = argc > 1 && !strcmp(argv[1], "few");
    only32 = argc > 1 && !strcmp(argv[1], "f32");
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("no CUDA device\n0 checks, 0 failed\n");
        return 0;
    }
    static gpt2__cuda_state S; /* the few fields these launchers read: device, sms, stream, pdl, ln_fold_smem, ln_fold_fit */
    memset(&S, 0, sizeof S);
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    CK(cudaSetDevice(0));
    CK(cudaStreamCreate(&S.stream));
    S.device = 0;
    S.sms = pr.multiProcessorCount;
    S.pdl = pr.major >= 9;
    printf("%s (sm_%d%d)\n", pr.name, pr.major, pr.minor);
    if (pr.major < 8) {
        printf("needs sm_80+\n0 checks, 0 failed\n");
        return 0;
    }
    if (!only32) {
        run_dtype<__half>(&S, "F16");
        run_dtype<__nv_bfloat16>(&S, "BF16");
    }
    if (!gpt2__few_row32_enable()) expect(0, "F32 skinny kernel enabled");
    else {
        const int shapes32[][3] = {{2304, 768, 1}, {768, 3072, 4}, {50264, 768, 1}, {1600, 6400, 4}, {104, 96, 1}, {1000, 400, 2}};
        for (size_t i = 0; i < sizeof shapes32 / sizeof shapes32[0]; i++)
            skinny32_shape(S.stream, S.pdl, few && shapes32[i][0] > 5000 ? 5000 : shapes32[i][0], shapes32[i][1], shapes32[i][2]);
    }
    if (!only32) {
        sampler_vocab(1003);
        sampler_vocab(50257);
    }
    CK(cudaDeviceSynchronize());
    printf("%d checks, %d failed\n", checks, failed);
    return failed != 0;
}
