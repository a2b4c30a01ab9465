/* bench_gpt2 — DESIGN.md's standard workloads on the CUDA backend, random weights made in process.

   Usage: bench/bench_gpt2 [124M|355M|774M|1558M ...] [--dtype f16|bf16|f32] [--only latency|throughput|prefill] [--reps N]
                         [--no-lookahead] [--no-pdl] [--no-skinny] [--no-lnf] [--no-lnf-fit] [--no-gather] [--no-stage] [--no-att-mma] [--no-hold] [--parts N] [--part-rows R]
                         [--att-sms N] [--split-ctx D] [--att-ns 2|3] [--att-tma 0|1] [--prefill-order 0|1] [--prefill-seqs N] [--at POS] [--bd-rows R] [--stagger N]
                         [--spec K]
                         [--pre model|kept|green|streams|fill:B:GB|h2d|copies:N|memsets:N|memsets0:N|used:K|kernels:N]
   bench/bench_gpt2 --gemm: the linear layers alone (timed inside CUDA graphs), cuBLASLt pinned for prompt rows and
                            for decode rows, against each row count's own pick
   bench/bench_gpt2 --breakdown [SIZE]: where one step's time goes, per phase
   bench/trace --trace SIZE: one many-row decode step's kernels on a timeline (CUPTI; TRACE_ALL=1 lists them)
   bench/bench_gpt2 --profile decode|one|prefill --breakdown [SIZE]: as --breakdown, and then one step of that kind (the
                            many-row decode step, the one-row step, the prefill step) once more between
                            cudaProfilerStart and cudaProfilerStop, for `ncu --profile-from-start off` (bench/profile.sh)
   bench/bench_gpt2 [--dtype D] --skinny-det SIZE...: whether each few-row decode product and its cuBLASLt reference
                            give the same bits run after run, and each other (what gpt2__skinny_check compares at load)
   bench/bench_gpt2 [--rows R] --prompt-gemms: cuBLASLt's first pick for prompt rows against the fastest of its top 16
   bench/bench_gpt2 [--reps N] --prefill-pair SIZE: the prefill workload as one step, as two half steps in turn, and
                            as two engines of half the batch at once (what parts of a prompt step could gain)
   bench/bench_gpt2 --steps SIZE...: a batch-1 decode step's wall time, graph alone against staged, pipelined, generate
                            (flags such as --no-lnf go before --steps); with BENCH_ALIAS=1 in the environment every
                            layer reads layer 0's weights (a wrong model, for timing: RESULTS.md item 104)
   bench/bench_gpt2 [--reps N] --spec-text DIR [K...]: speculation on real text: the model in DIR (e.g. weights) continues
                            a passage greedily, 256 tokens, without drafts and with at most K draft tokens a step
                            (default 2 4 6 8): ms per token, drafts kept, and whether the tokens are the same
   bench/bench_gpt2 --spec-steps SIZE...: a batch-1 step that verifies a draft, 1 + d rows of one sequence at position
                            192 (gpt2__cuda_step, waited for), against the one-row step, d = 0..15
   --prefill-seqs N (1..64): the prefill workload (and --breakdown's prefill step) over N sequences of 1024 instead
   of 16 (4 for --breakdown): the figure is then not DESIGN.md's workload.
   The standard workloads run without speculation (--spec K: with at most K draft tokens a step; random weights
   make any continuation's repetitiveness an accident of the weights, so those figures do not measure it).
   bench/bench_gpt2 --gelu-match: which formula cuBLASLt's GELU epilogue computes (RESULTS.md items 35 and 105)
   bench/bench_gpt2 --algo-classes | --algo-search | --class-pool: which cuBLASLt algorithms compute alike, every
                            algorithm id's best configuration per row count, every member of the pinned class timed
   (default: 124M, f16, every workload, 3 repeats). Each line: the figure (median of the repeats, after a warm-up),
   the bytes and FLOPs it had to move/do, and the fraction of the roofline from the copy bandwidth and the fp16 GEMM
   rate measured at the start of the same run. Also peak device memory per workload. */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#include <cuda_profiler_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static double median(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp_d); return v[n / 2]; }

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, gpt2_last_error()); exit(1); } } while (0)
#define CU(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

/* ---- the two ceilings, measured here */

/* seconds fn's work takes on the default stream: events around each of 6 calls, the first (warm-up) dropped, median */
template <typename F> static double event_median_s(F fn) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    double t[5];
    for (int r = 0; r < 6; r++) {
        cudaEventRecord(e0);
        fn();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r) t[r - 1] = ms * 1e-3;
    }
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    return median(t, 5);
}

/* device-to-device copy: bytes read + written per second */
static double measure_copy_bw(void) {
    size_t n = (size_t)2 << 30;
    void *a, *b;
    CU(cudaMalloc(&a, n)); CU(cudaMalloc(&b, n));
    CU(cudaMemset(a, 1, n));
    const double s = event_median_s([&]() { CU(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); });
    cudaFree(a); cudaFree(b);
    return 2.0 * n / s;
}

/* p[i] = scale * (a hash of i and seed, uniform in [-0.5, 0.5)), rounded to T */
template <typename T> __global__ void fill_random_t(T *p, size_t n, uint32_t seed, float scale) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
        gpt2__put(p + i, scale * ((float)(x & 0xFFFF) / 65536.0f - 0.5f));
    }
}

/* fp16 GEMM 8192^3 through the backend's own cuBLASLt path, random data */
static double measure_gemm_rate(void) {
    /* cuBLASLt's own pick for this shape (not gpt2__gemm_run, which pins one algorithm per weight
       shape for batch invariance): the ceiling is the best the library does */
    const int n = 8192;
    cublasLtHandle_t lt;
    CHECK(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
    size_t ws_size = (size_t)32 << 20;
    void *ws;
    CU(cudaMalloc(&ws, ws_size));
    __half *a, *b, *c;
    CU(cudaMalloc(&a, (size_t)n * n * 2)); CU(cudaMalloc(&b, (size_t)n * n * 2)); CU(cudaMalloc(&c, (size_t)n * n * 2));
    fill_random_t<__half><<<1024, 256>>>(a, (size_t)n * n, 1, 1.0f); fill_random_t<__half><<<1024, 256>>>(b, (size_t)n * n, 2, 1.0f);
    CU(cudaDeviceSynchronize());
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasOperation_t opT = CUBLAS_OP_T;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, n, n, n) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, n, n, n) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, n, n, n) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulPreference_t pref;
    CHECK(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof ws_size) ==
          CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &res, &found) == CUBLAS_STATUS_SUCCESS && found);
    const float one = 1.0f, zero = 0.0f;
    const double s = event_median_s([&]() {
        CHECK(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, c, lc, c, lc, &res.algo, ws, ws_size, 0) == CUBLAS_STATUS_SUCCESS);
    });
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(ws);
    cublasLtDestroy(lt);
    return 2.0 * n * n * (double)n / s;
}

/* ---- a model with random weights, built without files */

static int g_lookahead = 1; /* --no-lookahead: gpt2_generate waits for each step before launching the next */
static int g_pdl = 1;       /* --no-pdl: no programmatic dependent launches */
static int g_skinny = 1;    /* --no-skinny: every decode product through cuBLASLt */
static int g_lnf = 1;       /* --no-lnf: every layer norm a kernel of its own (no gpt2__lnf) */
static int g_gather = 1;    /* --no-gather: a prompt step's last layer on every fed row (RESULTS.md item 137) */
static int g_lnf_fit = 1;   /* --no-lnf-fit: the LN-folded products' full ring, not the FIT ring (gpt2__lnf_stages; RESULTS.md item 115) */
static int g_stage = 1;     /* --no-stage: decode attention reads few rows' cached K/V from global memory (L2) */
static int g_att_mma = 1;   /* --no-att-mma: decode attention on the CUDA cores (gpt2__attn_kernel) */
static int g_hold = 1;      /* --no-hold: gpt2_generate feeds an idle engine's decode rows as their prompts end */
static int g_spec = 0;      /* --spec K: gpt2_generate verifies up to K draft tokens a step (gpt2_model.spec) */
static int g_parts = -1;    /* --parts N: decode steps in up to N parts at once (gpt2__cuda_parts; 1: one run; -1: default;
                               more than 2 needs -DGPT2__MAX_PARTS) */
static int g_part_rows = -1; /* --part-rows R: ... of at least R rows each */
static int g_att_sms = -1;  /* --att-sms N: SMs kept for decode attention in a step of parts (gpt2__green_make; 0: no split) */
static int g_split_ctx = -1; /* --split-ctx D: ... in steps whose mean context >= n_embd / D (0: never) */
static int g_att_ns = 0;    /* --att-ns 2|3: gpt2__attn_stream_kernel's stages a warp */
static int g_att_tma = -1;  /* --att-tma 0|1: gpt2__attn_stream_kernel's TMA form off or on (where it can run) */
static int g_prefill_order = -1; /* --prefill-order 0|1: prefill attention's block order (tiles / heads inner) */
static int g_prefill_seqs = 0; /* --prefill-seqs N (1..64): the prefill step of N x 1024, for the workload (16 when not
                                   given) and for --breakdown (4 when not given) */
static int g_at = 160;        /* --at POS: --breakdown's many-row decode step at this position */
static int g_stagger = -1;     /* --stagger N: part 1 of a split step starts once part 0's layer N - 1 qkv product is done (0: at once) */
static int g_bd_rows = 0;      /* --bd-rows R: --breakdown's many-row decode step over R rows (default 1024; 256 at 1558M) */
static const char *g_profile = NULL; /* --profile decode|one|prefill: that --breakdown step once more under the profiler */

static gpt2_model *random_model(const char *size, gpt2_dtype dt, int max_batch, int max_seq, int prefill_tokens) {
    int L = 12, C = 768, H = 12;
    if (!strcmp(size, "355M")) { L = 24; C = 1024; H = 16; }
    else if (!strcmp(size, "774M")) { L = 36; C = 1280; H = 20; }
    else if (!strcmp(size, "1558M")) { L = 48; C = 1600; H = 25; }
    gpt2_model *m = (gpt2_model *)gpt2__zalloc(sizeof *m);
    m->cfg.n_layer = L; m->cfg.n_head = H; m->cfg.n_embd = C; m->cfg.n_ctx = 1024; m->cfg.n_vocab = 50257; m->cfg.ln_eps = 1e-5f;
    m->n_inner = 4 * C;
    m->backend = GPT2_BACKEND_CUDA; m->dtype = dt; m->device = -1;
    m->max_batch = max_batch; m->max_seq = max_seq; m->prefill_tokens = prefill_tokens;
    gpt2__slot *slots = NULL;
    int n_slots = 0;
    CHECK(gpt2__weights_layout(m, (size_t)-1, "random weights", 1, &slots, &n_slots) == GPT2_OK);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < m->w.n_floats; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        m->w.arena[i] = ((float)(x >> 40) / 16777216.0f - 0.5f) * 0.04f;
    }
    for (int l = 0; l < L; l++)
        for (int i = 0; i < C; i++) { m->w.layers[l].ln1_w[i] = 1.0f; m->w.layers[l].ln2_w[i] = 1.0f; }
    for (int i = 0; i < C; i++) m->w.lnf_w[i] = 1.0f;
    for (int i = 0; i < n_slots; i++) { slots[i].src = (const unsigned char *)slots[i].dst; slots[i].dtype = 'F'; }
    gpt2_status st = gpt2__cuda_init(m, slots); /* uploads the host arena as a float32 checkpoint */
    free(slots);
    free(m->w.arena); /* the host copy is the checkpoint's part: a CUDA model keeps none (params_of reads n_floats) */
    m->w.arena = NULL;
    if (st != GPT2_OK) { /* e.g. F32 774M at batch 1024 needs more than 80 GB: said, and skipped */
        printf("%-6s skipped (batch %d, %d tokens): %s\n", size, max_batch, max_seq, gpt2_last_error());
        gpt2_free(m);
        return NULL;
    }
    ((gpt2__cuda_state *)m->cuda)->lookahead = g_lookahead;
    if (!g_pdl) ((gpt2__cuda_state *)m->cuda)->pdl = 0;
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (!g_skinny) S->skinny = 0;
    if (!g_lnf) S->lnf = 0;
    if (!g_lnf_fit) S->lnf_fit = 0;
    if (!g_gather) S->gather = 0;
    if (getenv("BENCH_ALIAS")) /* bound for item 104: every layer reads layer 0's weights (wrong model, timing only) */
        for (int l = 1; l < L; l++) S->layers[l] = S->layers[0];
    if (!g_stage) S->att_stage = 0;
    if (!g_att_mma) S->att_mma = 0;
    m->no_hold = !g_hold;
    m->spec = g_spec;
    if (g_parts >= 1) S->parts = g_parts;
    if (g_part_rows >= 0) S->part_rows = g_part_rows;
    if (g_prefill_order >= 0) S->prefill_order = g_prefill_order;
    if (g_att_sms >= 0 && g_att_sms != S->att_sms) { S->att_sms = g_att_sms; gpt2__green_make(S, g_att_sms); }
    if (g_split_ctx >= 0) S->split_ctx = g_split_ctx;
    if (g_stagger >= 0) S->stagger = g_stagger;
    if (g_att_ns) S->att_ns = g_att_ns;
    if (g_att_tma >= 0) S->att_tma = g_att_tma;
    static int told = 0;
    if (!told++) {
        printf("skinny decode products verified bit-identical to cuBLASLt (%s):", size);
        for (int i = 0; i < S->sk_n; i++) printf(" %dx%d/%d", S->sk_ok[i][0], S->sk_ok[i][1], S->sk_ok[i][2]);
        printf("%s; layer norms folded into products at <= %d rows: %s; decode steps in up to %d parts of >= %d rows, "
               "their attention on %d SMs of its own (0: on every SM); decode attention reads the caches with %s; prompt attention on %s\n",
               !S->skinny ? " (off: --no-skinny)" : S->sk_n == 0 ? " none" : "", GPT2__LNF_ROWS,
               S->lnf ? "yes" : !g_lnf ? "no (--no-lnf)" : S->esize != 2 ? "no (F32)" : "no (this GPU)",
               S->parts, S->part_rows, S->green_sms, S->kv_tma && S->att_tma ? "TMA" : S->kv_tma ? "cp.async (--att-tma 0)" : "cp.async",
               S->flash_wg ? "wgmma" : S->flash ? (S->esize == 4 ? "CUDA cores, in tiles" : "mma.sync") : "CUDA cores, row by row");
        if (!S->green_sms) printf("no SMs of its own for decode attention: %s\n", S->green_why ? S->green_why : "?");
    }
    return m;
}

static double params_of(const gpt2_model *m) { return (double)m->w.n_floats; }

static size_t peak_used(void) {
    size_t f, t;
    cudaMemGetInfo(&f, &t);
    return t - f;
}

/* ---- workloads */

static double run_generate(gpt2_model *m, int B, int prompt, int gen) {
    int *prompts = (int *)malloc((size_t)B * prompt * sizeof(int)), *outs = (int *)malloc((size_t)B * gen * sizeof(int));
    gpt2_request *r = (gpt2_request *)calloc((size_t)B, sizeof *r);
    for (int i = 0; i < B * prompt; i++) prompts[i] = (int)((i * 7919u + 13u) % 50257u);
    for (int i = 0; i < B; i++) {
        r[i].prompt = prompts + (size_t)i * prompt; r[i].prompt_len = prompt;
        r[i].max_new_tokens = gen; r[i].stop_token = -1; r[i].out = outs + (size_t)i * gen;
    }
    CU(cudaDeviceSynchronize());
    double t0 = now_s();
    CHECK(gpt2_generate(m, r, B, NULL, NULL) == GPT2_OK);
    double t = now_s() - t0;
    free(prompts); free(outs); free(r);
    return t;
}

/* B sequences of T prompt tokens, each to its next-token logits (sampled greedily on the GPU): engine-sized steps of
   prefill_tokens rows, straight through the backend's step */
static double run_prefill(gpt2_model *m, int B, int T) {
    int per = m->prefill_tokens / T;
    if (per < 1) per = 1;
    if (per > m->max_batch) per = m->max_batch;
    int *tok = (int *)malloc((size_t)B * T * sizeof(int)), next[64];
    gpt2__seq seqs[64];
    memset(seqs, 0, sizeof seqs);
    for (int i = 0; i < B * T; i++) tok[i] = (int)((i * 7919u + 13u) % 50257u);
    CU(cudaDeviceSynchronize());
    double t0 = now_s();
    for (int b0 = 0; b0 < B; b0 += per) {
        int nb = B - b0 < per ? B - b0 : per;
        for (int i = 0; i < nb; i++) {
            seqs[i].slot = i; seqs[i].pos = 0; seqs[i].n_tok = T; seqs[i].tok = tok + (size_t)(b0 + i) * T; seqs[i].sample = 1;
            seqs[i].prompt = 1;
        }
        CHECK(gpt2__cuda_step(m, seqs, nb, next) == GPT2_OK);
    }
    double t = now_s() - t0;
    free(tok);
    return t;
}

/* --prefill-pair: the prefill workload as two engines of half the batch each, their steps launched back to back
   (each on its own stream) and then collected, against one engine of the whole batch: what running two halves of
   a prompt step at once (parts) could gain. Prints tokens/s of both, median of reps. */
static void prefill_pair(const char *size, gpt2_dtype dt, int reps) {
    gpt2_model *one = random_model(size, dt, 16, 1024, 16 * 1024), *half = random_model(size, dt, 16, 1024, 8 * 1024);
    gpt2_model *a = random_model(size, dt, 8, 1024, 8 * 1024), *b = random_model(size, dt, 8, 1024, 8 * 1024);
    if (!one || !half || !a || !b) return;
    int *tok = (int *)malloc((size_t)16 * 1024 * sizeof(int)), next[16];
    for (int i = 0; i < 16 * 1024; i++) tok[i] = (int)((i * 7919u + 13u) % 50257u);
    gpt2__seq sa[8], sb[8];
    memset(sa, 0, sizeof sa); memset(sb, 0, sizeof sb);
    for (int i = 0; i < 8; i++) {
        sa[i].slot = i; sa[i].n_tok = 1024; sa[i].tok = tok + (size_t)i * 1024; sa[i].sample = 1; sa[i].prompt = 1;
        sb[i] = sa[i]; sb[i].tok = tok + (size_t)(8 + i) * 1024;
    }
    double t1[64], th[64], tp[64];
    for (int r = 0; r <= reps; r++) {
        const double x1 = run_prefill(one, 16, 1024), xh = run_prefill(half, 16, 1024);
        CU(cudaDeviceSynchronize());
        const double t0 = now_s();
        CHECK(gpt2__cuda_launch(a, sa, 8, 0) == GPT2_OK);
        CHECK(gpt2__cuda_launch(b, sb, 8, 0) == GPT2_OK);
        CHECK(gpt2__cuda_collect(a, next) == GPT2_OK);
        CHECK(gpt2__cuda_collect(b, next + 8) == GPT2_OK);
        const double xp = now_s() - t0;
        if (r > 0) { t1[r - 1] = x1; th[r - 1] = xh; tp[r - 1] = xp; }
    }
    printf("%-6s prefill 16 x 1024: one step of 16384 %.0f tokens/s; two steps of 8192 in turn %.0f; two engines of 8192 at once %.0f\n",
           size, 16384 / median(t1, reps), 16384 / median(th, reps), 16384 / median(tp, reps));
    free(tok);
    gpt2_free(one); gpt2_free(half); gpt2_free(a); gpt2_free(b);
}

/* Where one step's time goes: the whole step, then each phase of its forward pass alone over the same inputs
   (events on the backend's stream, median of 5). The step's inputs are those gpt2__cuda_step staged last. */
typedef struct phase_t { const char *name; double ms; } phase_t;
static double time_ms(cudaStream_t st, void (*fn)(gpt2_model *, int), gpt2_model *m, int arg) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    double t[5];
    for (int r = 0; r < 6; r++) {
        cudaEventRecord(e0, st);
        fn(m, arg);
        cudaEventRecord(e1, st);
        CU(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r) t[r - 1] = ms;
    }
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    return median(t, 5);
}
static gpt2__cuda_meta g_d;   /* the device-side view of the last staged step */
static int g_N, g_P, g_n; /* fed rows, prompt rows among them, sequences */
/* the phases in the model's dtype */
template <typename T> static void ph_attention_t(gpt2_model *m) {
    for (int l = 0; l < m->cfg.n_layer; l++) CHECK(gpt2__attention<T>((gpt2__cuda_state *)m->cuda, m, l, &g_d, g_N) == GPT2_OK);
}
template <typename T> static void ph_gemms_t(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const int C = m->cfg.n_embd, F = m->n_inner, N = g_N;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const gpt2__cuda_layer *y = &S->layers[l];
        CHECK(gpt2__linear<T>(m, S, S->qkv, y->qkv_w, S->ln, y->qkv_b, 3 * C, N, g_P, C, GPT2__EPI_BIAS, 0, 0, NULL) == GPT2_OK);
        CHECK(gpt2__linear<T>(m, S, S->proj, y->proj_w, S->att, y->proj_b, C, N, g_P, C, GPT2__EPI_BIAS, 0, 0, S->part) == GPT2_OK);
        CHECK(gpt2__linear<T>(m, S, S->fc, y->fc_w, S->ln, y->fc_b, F, N, g_P, C, GPT2__EPI_BIAS_GELU, 0, 0, NULL) == GPT2_OK);
        CHECK(gpt2__linear<T>(m, S, S->att, y->fcp_w, S->fc, y->fcp_b, C, N, g_P, F, GPT2__EPI_BIAS, 0, 0, S->part) == GPT2_OK);
    }
}
template <typename T> static void ph_logits_t(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    CHECK(gpt2__linear<T>(m, S, S->logits, S->wte, S->ln, NULL, S->ldv, g_n, 0, m->cfg.n_embd, GPT2__EPI_NONE, 1, S->ldv, NULL) ==
          GPT2_OK);
}
template <typename T> static void ph_norms_t(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const int C = m->cfg.n_embd;
    for (int l = 0; l < 2 * m->cfg.n_layer; l++) {
        const int K = l & 1 ? m->n_inner : C;
        /* a layer's two passes as gpt2__cuda_run_t runs them: prompt rows' first one deferred, the second adding
           the MLP's output (in att) after the projection's */
        const gpt2__resid<T> ad = {(const T *)S->proj, S->part, (const T *)S->layers[l / 2].proj_b,
                                        (size_t)(g_N - g_P) * C, gpt2__decode_splits(K), g_P, NULL,
                                        l & 1 ? (const T *)S->att : NULL, l & 1 ? 0 : 1};
        CHECK(gpt2__residual_ln<T>(S->stream, g_N, S->x, ad, NULL, NULL, NULL, NULL, NULL, S->lnf_w, S->lnf_b, (T *)S->ln, C, 1e-5f, S->pdl) ==
              GPT2_OK);
    }
}
/* the separate K/V store: no rows when the attention kernels store their own (gpt2__attention) */
template <typename T> static void ph_kv_store_t(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const int C = m->cfg.n_embd, H = m->cfg.n_head;
    for (int l = 0; l < m->cfg.n_layer; l++)
        CHECK(gpt2__kv_store<T>(S->stream, S->sms, (const T *)S->qkv, (T *)S->k_cache, (T *)S->v_cache, g_d.slot,
                                     g_d.pos, S->flash ? 0 : g_N, C, H, m->max_seq) == GPT2_OK);
}
/* a phase in the model's dtype */
#define BY_DTYPE(m, F) ((m)->dtype == GPT2_DTYPE_BF16 ? F<__nv_bfloat16>(m) : (m)->dtype == GPT2_DTYPE_F32 ? F<float>(m) : F<__half>(m))
static void ph_attention(gpt2_model *m, int) { BY_DTYPE(m, ph_attention_t); }
static void ph_gemms(gpt2_model *m, int) { BY_DTYPE(m, ph_gemms_t); }
static void ph_logits(gpt2_model *m, int) { BY_DTYPE(m, ph_logits_t); }
static void ph_norms(gpt2_model *m, int) { BY_DTYPE(m, ph_norms_t); }
static void ph_kv_store(gpt2_model *m, int) { BY_DTYPE(m, ph_kv_store_t); }
static void ph_sampler(gpt2_model *m, int) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    gpt2__sample_kernel<<<g_n, GPT2__SAMPLE_THREADS, 0, S->stream>>>(S->logits, m->cfg.n_vocab, S->ldv, g_d.picks, g_d.next,
                                                                      gpt2__advance{NULL, NULL, NULL, 0}, 0, NULL, 0);
}
static void ph_step(gpt2_model *m, int) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (g_P == 0 && S->use_graphs) CHECK(gpt2__cuda_decode_graph(m, &g_d, g_n, S->parts_last) == GPT2_OK);
    else CHECK(gpt2__cuda_step_body(m, &g_d, g_N, g_P, g_n, S->parts_last) == GPT2_OK);
}

/* one step of n sequences: prompt chunks of T tokens (T > 1) or decode rows at position T (T < 0: -T) */
static void breakdown(const char *label, gpt2_model *m, int n, int T, const char *kind) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    int *tok = (int *)calloc((size_t)n * (T > 0 ? T : 1), sizeof(int)), *next = (int *)malloc((size_t)n * sizeof(int));
    gpt2__seq *seqs = (gpt2__seq *)calloc((size_t)n, sizeof *seqs);
    for (int i = 0; i < n; i++) {
        seqs[i].slot = i; seqs[i].sample = 1;
        if (T > 0) { seqs[i].pos = 0; seqs[i].n_tok = T; seqs[i].tok = tok + (size_t)i * T; seqs[i].prompt = 1; }
        else { seqs[i].pos = -T; seqs[i].n_tok = 1; seqs[i].tok = tok + i; }
    }
    CHECK(gpt2__cuda_step(m, seqs, n, next) == GPT2_OK);
    g_N = T > 0 ? n * T : n; g_P = T > 0 ? g_N : 0; g_n = n;
    gpt2__cuda_meta h = gpt2__meta_at(S->h_meta[S->stage], g_N, n, n);
    gpt2__plan_attention(&h, g_N, S->flash);
    g_d = gpt2__meta_at(S->d_meta, g_N, n, n);
    g_d.n_att = h.n_att; g_d.n_tiles = h.n_tiles; g_d.tile_keys = h.tile_keys;
    /* the compacted last layer as gpt2__cuda_step set it up (RESULTS.md item 137; the host values are not in the blob) */
    g_d.gat_P = n - (g_N - g_P);
    g_d.n_gat = S->gather > 0 && g_P - g_d.gat_P >= S->gather ? n : 0;
    phase_t ph[] = {{"step", time_ms(S->stream, ph_step, m, 0)}, {"attention", time_ms(S->stream, ph_attention, m, 0)},
                    {"gemms", time_ms(S->stream, ph_gemms, m, 0)}, {"logits", time_ms(S->stream, ph_logits, m, 0)},
                    {"norms", time_ms(S->stream, ph_norms, m, 0)}, {"kv_store", time_ms(S->stream, ph_kv_store, m, 0)},
                    {"sampler", time_ms(S->stream, ph_sampler, m, 0)}};
    printf("breakdown %-28s", label);
    for (size_t i = 0; i < sizeof ph / sizeof ph[0]; i++) printf("  %s %.3f", ph[i].name, ph[i].ms);
    printf("  (ms)\n");
    if (S->split_step) { /* the step split: its phases on their own SMs (gpt2__green_make) */
        const cudaStream_t own = S->stream;
        S->stream = S->gstream[0][0];
        const double a = time_ms(S->stream, ph_attention, m, 0);
        S->stream = S->gstream[1][0];
        const double g = time_ms(S->stream, ph_gemms, m, 0), nr = time_ms(S->stream, ph_norms, m, 0),
                     lg = time_ms(S->stream, ph_logits, m, 0);
        S->stream = own;
        printf("breakdown %-28s  split: attention on its %d SMs %.3f; on the other %d: gemms %.3f  norms %.3f  logits %.3f  (ms)\n", label,
               S->green_sms, a, S->sms - S->green_sms, g, nr, lg);
    }
    if (g_profile && !strcmp(g_profile, kind)) { /* the whole step once more, alone, for the profiler */
        CU(cudaStreamSynchronize(S->stream));
        CU(cudaProfilerStart());
        ph_step(m, 0);
        CU(cudaStreamSynchronize(S->stream));
        CU(cudaProfilerStop());
        printf("profiled %s\n", label);
    }
    free(tok); free(next); free(seqs);
}

/* ---- one decode step's kernels on a timeline (--trace SIZE; a build with -DBENCH_CUPTI ... -lcupti: make bench/trace)

   CUPTI's concurrent-kernel records of one many-row decode step (the throughput batch at position --at, as
   --breakdown's, replayed from its graph, nothing else on the GPU): each kernel's start and end. In a step of parts
   with the SMs split (gpt2__cuda_parts), decode attention's kernels run on the attention set and every other kernel
   on the rest until the last part's tail, so the two sets' busy time, their overlap and the time neither is busy say
   where such a step waits (RESULTS.md, seventh session of 2026-11-27). */
#ifdef BENCH_CUPTI
#include <cupti.h>
#include <algorithm>
struct trace_k { uint64_t t0, t1; int attn; const char *name; };
static std::vector<trace_k> g_tr;
static void CUPTIAPI tr_request(uint8_t **buf, size_t *size, size_t *max_records) {
    *size = 8 << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}
static void CUPTIAPI tr_complete(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
            g_tr.push_back({k->start, k->end, strstr(k->name, "attn_stream") != NULL, strdup(k->name)});
        }
    free(buf);
}
/* summed length of the union of intervals */
static double tr_union(std::vector<std::pair<uint64_t, uint64_t>> v) {
    std::sort(v.begin(), v.end());
    double sum = 0;
    uint64_t a = 0, b = 0;
    for (size_t i = 0; i < v.size(); i++) {
        if (i == 0 || v[i].first > b) { if (i) sum += (double)(b - a); a = v[i].first; b = v[i].second; }
        else if (v[i].second > b) b = v[i].second;
    }
    if (!v.empty()) sum += (double)(b - a);
    return sum;
}
static void trace_step(const char *size, gpt2_dtype dt) {
    if (cuptiActivityRegisterCallbacks(tr_request, tr_complete) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) { fprintf(stderr, "CUPTI unavailable\n"); exit(1); }
    const int B = g_bd_rows > 0 ? g_bd_rows : !strcmp(size, "1558M") ? 256 : 1024;
    gpt2_model *m = random_model(size, dt, B, 256, 0);
    CHECK(m);
    int *tok = (int *)calloc((size_t)B, sizeof(int)), *next = (int *)malloc((size_t)B * sizeof(int));
    gpt2__seq *seqs = (gpt2__seq *)calloc((size_t)B, sizeof *seqs);
    for (int i = 0; i < B; i++) { seqs[i].slot = i; seqs[i].sample = 1; seqs[i].pos = g_at; seqs[i].n_tok = 1; seqs[i].tok = tok + i; }
    for (int r = 0; r < 5; r++) CHECK(gpt2__cuda_step(m, seqs, B, next) == GPT2_OK); /* captured, then warm */
    CU(cudaDeviceSynchronize());
    cuptiActivityFlushAll(1);
    for (int rep = 0; rep < 3; rep++) {
        g_tr.clear();
        CHECK(gpt2__cuda_step(m, seqs, B, next) == GPT2_OK);
        CU(cudaDeviceSynchronize());
        cuptiActivityFlushAll(1);
        if (g_tr.empty()) { printf("trace: no kernel records\n"); break; }
        std::sort(g_tr.begin(), g_tr.end(), [](const trace_k &a, const trace_k &b) { return a.t0 < b.t0; });
        const uint64_t t0 = g_tr.front().t0;
        uint64_t t1 = t0, last_attn = t0;
        std::vector<std::pair<uint64_t, uint64_t>> att, oth, all;
        for (const trace_k &k : g_tr) {
            t1 = std::max(t1, k.t1);
            (k.attn ? att : oth).push_back({k.t0, k.t1});
            all.push_back({k.t0, k.t1});
            if (k.attn) last_attn = std::max(last_attn, k.t1);
        }
        /* both sets busy at once: |A| + |O| - |A u O| */
        const double span = (double)(t1 - t0), ua = tr_union(att), uo = tr_union(oth), uall = tr_union(all);
        int after = 0;
        for (const trace_k &k : g_tr) after += k.t0 >= last_attn;
        printf("trace %s decode %d x ctx %d: %zu kernels (%zu attention) over %.3f ms; attention busy %.3f ms, the others %.3f, "
               "both at once %.3f, neither %.3f; after the last attention kernel %d kernels, %.3f ms\n",
               size, B, g_at, g_tr.size(), att.size(), span / 1e6, ua / 1e6, uo / 1e6, (ua + uo - uall) / 1e6,
               (span - uall) / 1e6, after, (double)(t1 - last_attn) / 1e6);
        if (rep == 2 && getenv("TRACE_ALL"))
            for (const trace_k &k : g_tr)
                printf("  %9.1f %9.1f  %7.1f  %c %.60s\n", (k.t0 - t0) / 1e3, (k.t1 - t0) / 1e3, (k.t1 - k.t0) / 1e3,
                       k.attn ? 'A' : '.', k.name);
    }
    free(tok); free(next); free(seqs);
    gpt2_free(m);
}
#endif

/* ---- the linear layers alone: cuBLASLt pinned as for prompt rows (algorithm picked for 4096 rows) and as for decode
   rows (GPT2_GEMM_REF_ROWS), per weight shape and row count; microseconds per call (10 back to back, median of 7),
   weight GB/s and TFLOP/s */
/* Per call of fn(k), in microseconds: `calls` calls (k = 0..calls-1) captured in one CUDA graph (the engine replays
   its decode steps from graphs, so host launch cost does not count), the replay timed with events, median of 7 after
   a warm-up. fn(0) is run once eagerly first (plans are made outside capture). 1e30 if a call fails. graph_us: 10
   calls of fn(). */
template <typename F> static double graph_calls_us(cudaStream_t st, int calls, F fn) {
    if (!fn(0)) return 1e30;
    CU(cudaStreamSynchronize(st));
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    int ok = 1;
    for (int k = 0; k < calls; k++) ok = ok && fn(k);
    CU(cudaStreamEndCapture(st, &g));
    if (!ok || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        return 1e30;
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    double t[7];
    for (int r = 0; r < 8; r++) {
        cudaEventRecord(e0, st);
        CU(cudaGraphLaunch(ge, st));
        cudaEventRecord(e1, st);
        CU(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r) t[r - 1] = ms * 1000.0 / calls;
    }
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
    return median(t, 7);
}
template <typename F> static double graph_us(cudaStream_t st, F fn) { return graph_calls_us(st, 10, [&](int) { return fn(); }); }

static cudaDataType_t g_gemm_dt = CUDA_R_16F; /* --gemm's dtype: --dtype bf16 before it for BF16 */
static double time_us(gpt2__cuda_state *S, int which, void *D, const void *W, const void *X, const void *b, int O, int N, int I) {
    const int logits = O > 10000; /* the logits: no bias, fp32 out, as the engine runs them */
    return graph_us(S->stream, [&]() {
        return gpt2__gemm_run(S, g_gemm_dt, D, W, X, logits ? NULL : b, O, N, I, logits ? GPT2__EPI_NONE : GPT2__EPI_BIAS, logits, 0,
                              which == 1 ? 4096 : which == 2 ? GPT2_GEMM_REF_ROWS : N, 1) == GPT2_OK;
    });
}
/* A backend state with a stream, a cuBLASLt handle and its workspace, no model (the kernel and GEMM tables); pdl as the
   engine sets it (and --no-pdl) */
static void bare_state(gpt2__cuda_state *S) {
    memset(S, 0, sizeof *S);
    cudaDeviceProp pr;
    CU(cudaGetDeviceProperties(&pr, 0));
    S->sms = pr.multiProcessorCount;
    S->pdl = pr.major >= 9 && g_pdl;
    CU(cudaStreamCreate(&S->stream));
    CHECK(cublasLtCreate(&S->lt) == CUBLAS_STATUS_SUCCESS);
    S->lt_ws_size = (size_t)32 << 20;
    CU(cudaMalloc(&S->lt_ws, S->lt_ws_size));
}
static void gemm_table(void) {
    gpt2__cuda_state S0, *S = &S0;
    bare_state(S);
    const int shapes[][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}, {50264, 768},
                             {4800, 1600}, {1600, 1600}, {6400, 1600}, {1600, 6400}};
    const int rows[] = {1, 4, 16, 64, 256, 1024};
    __half *W, *X, *D, *b;
    CU(cudaMalloc(&W, (size_t)50264 * 1600 * 2)); CU(cudaMalloc(&X, (size_t)1024 * 6400 * 2));
    CU(cudaMalloc(&D, (size_t)1024 * 50264 * 4)); CU(cudaMalloc(&b, (size_t)50264 * 2));
    fill_random_t<__half><<<1024, 256>>>(W, (size_t)50264 * 1600, 3, 1.0f); fill_random_t<__half><<<1024, 256>>>(X, (size_t)1024 * 6400, 4, 1.0f);
    fill_random_t<__half><<<256, 256>>>(b, 50264, 5, 1.0f);
    printf("%s: %-12s %5s | %-26s | %-26s | %-26s | %-17s | plan for 128: how, algo id, tile, stages\n",
           g_gemm_dt == CUDA_R_16BF ? "BF16" : "F16", "O x I", "rows", "cuBLASLt(4096) us GB/s TF", "cuBLASLt(128) us GB/s TF",
           "own rows (not invariant)", "as K pieces: us");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
            const int O = shapes[si][0], I = shapes[si][1], N = rows[ri];
            if (O > 10000 && N > 64 && N < 1024) continue;
            char name[32];
            snprintf(name, sizeof name, "%dx%d", O, I);
            printf("%-12s %5d", name, N);
            for (int which = 1; which < 4; which++) {
                double us = time_us(S, which, D, W, X, b, O, N, I);
                printf(" | %8.1f %7.0f %8.1f", us, (double)O * I * 2 / (us * 1e-6) / 1e9, 2.0 * O * I * N / (us * 1e-6) / 1e12);
            }
            /* a projection into the residual as decode rows run it: fp32 K pieces, no bias (gpt2__linear with part) */
            const int sp = gpt2__decode_splits(I);
            if (O <= 1600 && sp > 1) {
                const double us = graph_us(S->stream, [&]() {
                    return gpt2__gemm_run(S, g_gemm_dt, D, W, X, NULL, O, N, I, GPT2__EPI_NONE, 1, O, GPT2_GEMM_REF_ROWS, sp) == GPT2_OK;
                });
                printf(" | %d pieces %6.1f", sp, us);
            } else printf(" | %17s", "-");
            for (int i = 0; i < S->n_gemm; i++) {
                const gpt2__gemm *g = &S->gemm[i];
                if (g->O != O || g->I != I || g->N != N || g->ref != GPT2_GEMM_REF_ROWS || g->splits != 1) continue;
                int id = -1, tile = -1, stages = -1;
                size_t got = 0;
                cublasLtMatmulAlgoConfigGetAttribute(&g->algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &got);
                cublasLtMatmulAlgoConfigGetAttribute(&g->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &got);
                cublasLtMatmulAlgoConfigGetAttribute(&g->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &got);
                printf(" | %d %d %d %d", g->how, id, tile, stages);
            }
            printf("\n");
        }
    cudaFree(W); cudaFree(X); cudaFree(D); cudaFree(b);
}

/* a stream, a cuBLASLt handle and a 32 MB workspace, as the engine has */
static void lt_setup(cudaStream_t *st, cublasLtHandle_t *lt, void **ws, size_t *ws_size) {
    CU(cudaStreamCreate(st));
    CHECK(cublasLtCreate(lt) == CUBLAS_STATUS_SUCCESS);
    *ws_size = (size_t)32 << 20;
    CU(cudaMalloc(ws, *ws_size));
}

/* F16 operands, fp32 compute, W transposed (as gpt2__gemm_run): with a bias pointer, the bias epilogue */
static cublasLtMatmulDesc_t lt_desc(const __half *b) {
    cublasLtMatmulDesc_t desc;
    cublasOperation_t opT = CUBLAS_OP_T;
    cublasLtEpilogue_t ep = b ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
    if (b) cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b);
    return desc;
}

/* every product shape of 124M and 1558M (out x in): qkv, attention projection, MLP first, MLP projection */
static const int g_shapes[8][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}, {4800, 1600}, {1600, 1600}, {6400, 1600}, {1600, 6400}};
/* random F16 operands for every shape at up to N rows: W [6400 x 1600], X and D [N x 6400], bias [6400] */
static void gemm_operands(int N, __half **W, __half **X, __half **D, __half **b) {
    CU(cudaMalloc(W, (size_t)6400 * 1600 * 2)); CU(cudaMalloc(X, (size_t)N * 6400 * 2));
    CU(cudaMalloc(D, (size_t)N * 6400 * 2)); CU(cudaMalloc(b, 6400 * 2));
    fill_random_t<__half><<<1024, 256>>>(*W, (size_t)6400 * 1600, 3, 1.0f); fill_random_t<__half><<<1024, 256>>>(*X, (size_t)N * 6400, 4, 1.0f);
    fill_random_t<__half><<<64, 256>>>(*b, 6400, 5, 1.0f);
}

/* ---- which cuBLASLt algorithms compute bit-identical rows: for each weight shape and row count, cuBLASLt's top
   candidates run on the same X and W; each candidate's rows are compared bit for bit with the algorithm pinned for
   GPT2_GEMM_REF_ROWS rows (what decode rows use now). Prints id, tile, split-K, stages, time, equal or not. */
static void algo_classes(void) {
    cudaStream_t st;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_size;
    lt_setup(&st, &lt, &ws, &ws_size);
    const int (*shapes)[2] = g_shapes;
    const int rows[] = {1, 8, 64, 256, 1024};
    __half *W, *X, *D0, *D1, *b;
    CU(cudaMalloc(&W, (size_t)6400 * 1600 * 2)); CU(cudaMalloc(&X, (size_t)1024 * 6400 * 2));
    CU(cudaMalloc(&D0, (size_t)1024 * 6400 * 2)); CU(cudaMalloc(&D1, (size_t)1024 * 6400 * 2)); CU(cudaMalloc(&b, 6400 * 2));
    fill_random_t<__half><<<1024, 256>>>(W, (size_t)6400 * 1600, 3, 1.0f); fill_random_t<__half><<<1024, 256>>>(X, (size_t)1024 * 6400, 4, 1.0f);
    fill_random_t<__half><<<64, 256>>>(b, 6400, 5, 1.0f);
    unsigned short *h0 = (unsigned short *)malloc((size_t)1024 * 6400 * 2), *h1 = (unsigned short *)malloc((size_t)1024 * 6400 * 2);
    for (size_t si = 0; si < 8; si++) {
        const int O = shapes[si][0], I = shapes[si][1];
        cublasLtMatmulDesc_t desc = lt_desc(b);
        cublasLtMatrixLayout_t la;
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, I, O, I);
        cublasLtMatmulPreference_t pref;
        cublasLtMatmulPreferenceCreate(&pref);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof ws_size);
        /* the reference: cuBLASLt's pick for GPT2_GEMM_REF_ROWS rows */
        cublasLtMatrixLayout_t lbr, ldr;
        cublasLtMatrixLayoutCreate(&lbr, CUDA_R_16F, I, GPT2_GEMM_REF_ROWS, I);
        cublasLtMatrixLayoutCreate(&ldr, CUDA_R_16F, O, GPT2_GEMM_REF_ROWS, O);
        cublasLtMatmulHeuristicResult_t ref;
        int found = 0;
        CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lbr, ldr, ldr, pref, 1, &ref, &found) == CUBLAS_STATUS_SUCCESS && found);
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
            const int N = rows[ri];
            cublasLtMatrixLayout_t lb, ld;
            cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, I, N, I);
            cublasLtMatrixLayoutCreate(&ld, CUDA_R_16F, O, N, O);
            const float one = 1.0f, zero = 0.0f;
            CHECK(cublasLtMatmul(lt, desc, &one, W, la, X, lb, &zero, D0, ld, D0, ld, &ref.algo, ws, ws_size, st) == CUBLAS_STATUS_SUCCESS);
            CU(cudaStreamSynchronize(st));
            CU(cudaMemcpy(h0, D0, (size_t)N * O * 2, cudaMemcpyDeviceToHost));
            cublasLtMatmulHeuristicResult_t cand[8];
            int nc = 0;
            cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 8, cand, &nc);
            for (int c = -1; c < nc; c++) {
                const cublasLtMatmulAlgo_t *al = c < 0 ? &ref.algo : &cand[c].algo;
                int id = 0, tile = 0, splitk = 0, stages = 0, red = 0;
                size_t sz;
                cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(al, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &sz);
                cudaEvent_t e0, e1;
                cudaEventCreate(&e0); cudaEventCreate(&e1);
                double t[5];
                int ok = 1;
                for (int r = 0; r < 6 && ok; r++) {
                    cudaEventRecord(e0, st);
                    for (int k = 0; k < 10; k++)
                        ok = ok && cublasLtMatmul(lt, desc, &one, W, la, X, lb, &zero, D1, ld, D1, ld, al, ws, ws_size, st) == CUBLAS_STATUS_SUCCESS;
                    cudaEventRecord(e1, st);
                    cudaEventSynchronize(e1);
                    float ms;
                    cudaEventElapsedTime(&ms, e0, e1);
                    if (r) t[r - 1] = ms * 100.0;
                }
                cudaEventDestroy(e0); cudaEventDestroy(e1);
                if (!ok) { printf("%5dx%-5d N %4d cand %2d: fails\n", O, I, N, c); continue; }
                CU(cudaMemcpy(h1, D1, (size_t)N * O * 2, cudaMemcpyDeviceToHost));
                size_t diff = 0;
                for (size_t i = 0; i < (size_t)N * O; i++) diff += h0[i] != h1[i];
                printf("%5dx%-5d N %4d %s %2d: algo %3d tile %3d splitK %2d red %d stages %3d  %7.1f us  %s (%zu of %zu differ)\n", O, I, N,
                       c < 0 ? "ref " : "cand", c, id, tile, splitk, red, stages, median(t, 5), diff ? "DIFFERENT" : "identical", diff, (size_t)N * O);
            }
            cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
        }
        cublasLtMatrixLayoutDestroy(lbr); cublasLtMatrixLayoutDestroy(ldr); cublasLtMatrixLayoutDestroy(la);
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatmulDescDestroy(desc);
    }
    free(h0); free(h1);
}

/* --algo-search: for the decode GEMMs that are not split into pieces (124M and 1558M qkv and fc), every cuBLASLt
   algorithm id with every tile and stage count it offers, K unsplit, timed at 1, 128 and 1024 rows (graph_us, F16,
   bias epilogue): per id its best time per row count, to see whether one id (one arithmetic class) is
   fast at one row and at many. */
/* ---- prompt rows: how far cuBLASLt's first pick (what gpt2.cuh runs for prompt rows) is from the fastest of its top
   16 candidates, at the rows of a full prompt step (4096 by default; --rows R), per product shape of 124M and 1558M */
static int g_prompt_rows = 4096;
static void prompt_gemms(void) {
    const int N = g_prompt_rows;
    __half *W, *X, *D, *b;
    gemm_operands(N, &W, &X, &D, &b);
    cudaStream_t st;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_size;
    lt_setup(&st, &lt, &ws, &ws_size);
    /* every product of every shape (qkv, attention projection, MLP first with its GELU, MLP projection), in --gemm's dtype */
    static const int shapes[16][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}, {3072, 1024}, {1024, 1024}, {4096, 1024},
                                      {1024, 4096}, {3840, 1280}, {1280, 1280}, {5120, 1280}, {1280, 5120}, {4800, 1600},
                                      {1600, 1600}, {6400, 1600}, {1600, 6400}};
    const cudaDataType_t dt = g_gemm_dt;
    printf("%s prompt products at %d rows\n", dt == CUDA_R_16BF ? "BF16" : "F16", N);
    for (size_t si = 0; si < 16; si++) {
        const int O = shapes[si][0], I = shapes[si][1], gelu = O == 4 * I;
        cublasLtMatmulDesc_t desc = lt_desc(b);
        if (gelu) {
            cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_GELU_BIAS;
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
        }
        if (dt == CUDA_R_16BF) {
            cudaDataType_t bt = CUDA_R_16BF;
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
        }
        cublasLtMatrixLayout_t la, lb, ld;
        cublasLtMatrixLayoutCreate(&la, dt, I, O, I);
        cublasLtMatrixLayoutCreate(&lb, dt, I, N, I);
        cublasLtMatrixLayoutCreate(&ld, dt, O, N, O);
        const float one = 1.0f, zero = 0.0f;
        cublasLtMatmulPreference_t pref;
        cublasLtMatmulPreferenceCreate(&pref);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof ws_size);
        cublasLtMatmulHeuristicResult_t hr[16];
        int found = 0;
        cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 16, hr, &found);
        double t0 = 0, tb = 1e30;
        int best = -1, id0 = -1, idb = -1;
        for (int k = 0; k < found; k++) {
            const double us = graph_us(st, [&]() {
                return cublasLtMatmul(lt, desc, &one, W, la, X, lb, &zero, D, ld, D, ld, &hr[k].algo, ws, ws_size, st) == CUBLAS_STATUS_SUCCESS;
            });
            int id = -1;
            size_t sz;
            cublasLtMatmulAlgoConfigGetAttribute(&hr[k].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &sz);
            if (k == 0) { t0 = us; id0 = id; }
            if (us < tb) { tb = us; best = k; idb = id; }
        }
        const double fl = 2.0 * N * O * I;
        printf("prompt gemm %5dx%-5d%s at %d rows: first pick %.1f us (id %d, %.0f TFLOP/s); fastest of %d: #%d %.1f us (id %d, %.0f TFLOP/s)\n",
               O, I, gelu ? " gelu" : "", N, t0, id0, fl / t0 / 1e6, found, best, tb, idb, fl / tb / 1e6);
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulDescDestroy(desc);
        cudaGetLastError();
    }
    cudaFree(W); cudaFree(X); cudaFree(D); cudaFree(b);
}

static void algo_search(void) {
    cudaStream_t st;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_size;
    lt_setup(&st, &lt, &ws, &ws_size);
    const int shapes[][2] = {{2304, 768}, {3072, 768}, {4800, 1600}, {6400, 1600}};
    const int rows[] = {1, 128, 1024};
    __half *W, *X, *D, *b;
    gemm_operands(1024, &W, &X, &D, &b);
    int ids[256], nid = 0;
    CHECK(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, 256, ids,
                                   &nid) == CUBLAS_STATUS_SUCCESS);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int O = shapes[si][0], I = shapes[si][1];
        cublasLtMatmulDesc_t desc = lt_desc(b);
        cublasLtMatrixLayout_t la;
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, I, O, I);
        double best[256][3];
        int cfg[256][3][2], heur_id[3];
        double heur[3];
        for (int ri = 0; ri < 3; ri++) {
            const int N = rows[ri];
            cublasLtMatrixLayout_t lb, ld;
            cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, I, N, I);
            cublasLtMatrixLayoutCreate(&ld, CUDA_R_16F, O, N, O);
            const float one = 1.0f, zero = 0.0f;
            auto timeit = [&](const cublasLtMatmulAlgo_t *al) {
                return graph_us(st, [&]() {
                    return cublasLtMatmul(lt, desc, &one, W, la, X, lb, &zero, D, ld, D, ld, al, ws, ws_size, st) == CUBLAS_STATUS_SUCCESS;
                });
            };
            cublasLtMatmulPreference_t pref;
            cublasLtMatmulPreferenceCreate(&pref);
            cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof ws_size);
            cublasLtMatmulHeuristicResult_t hr;
            int found = 0;
            cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &hr, &found);
            heur[ri] = found ? timeit(&hr.algo) : 0;
            size_t sz;
            heur_id[ri] = -1;
            if (found) cublasLtMatmulAlgoConfigGetAttribute(&hr.algo, CUBLASLT_ALGO_CONFIG_ID, &heur_id[ri], sizeof(int), &sz);
            cublasLtMatmulPreferenceDestroy(pref);
            for (int a = 0; a < nid; a++) {
                best[a][ri] = 1e30; cfg[a][ri][0] = cfg[a][ri][1] = -1;
                cublasLtMatmulAlgo_t al;
                if (cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, ids[a], &al) !=
                    CUBLAS_STATUS_SUCCESS)
                    continue;
                uint32_t tiles[128], stages[128];
                size_t nt = 0, ns = 0;
                cublasLtMatmulAlgoCapGetAttribute(&al, CUBLASLT_ALGO_CAP_TILE_IDS, tiles, sizeof tiles, &nt);
                cublasLtMatmulAlgoCapGetAttribute(&al, CUBLASLT_ALGO_CAP_STAGES_IDS, stages, sizeof stages, &ns);
                nt /= 4; ns /= 4;
                if (!nt) { tiles[0] = 0; nt = 1; }
                if (!ns) { stages[0] = 0; ns = 1; }
                int valid = 0;
                for (size_t t = 0; t < nt; t++)
                    for (size_t g = 0; g < ns; g++) {
                        int one_split = 1, tile = (int)tiles[t], stage = (int)stages[g];
                        cublasLtMatmulAlgoConfigSetAttribute(&al, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
                        cublasLtMatmulAlgoConfigSetAttribute(&al, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage, sizeof stage);
                        cublasLtMatmulAlgoConfigSetAttribute(&al, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split, sizeof one_split);
                        cublasLtMatmulHeuristicResult_t chk;
                        if (cublasLtMatmulAlgoCheck(lt, desc, la, lb, ld, ld, &al, &chk) != CUBLAS_STATUS_SUCCESS || chk.workspaceSize > ws_size)
                            continue;
                        valid++;
                        double us = timeit(&al);
                        if (us < best[a][ri]) { best[a][ri] = us; cfg[a][ri][0] = tile; cfg[a][ri][1] = stage; }
                    }
                if (si == 0 && ri == 0) printf("search id %d: %zu tiles x %zu stages, %d pass the check\n", ids[a], nt, ns, valid);
            }
            cudaGetLastError();
            cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
        }
        printf("search %dx%d: heuristic's pick %.1f us (id %d) at 1 row, %.1f (id %d) at 128, %.1f (id %d) at 1024\n", O, I, heur[0],
               heur_id[0], heur[1], heur_id[1], heur[2], heur_id[2]);
        for (int a = 0; a < nid; a++) {
            if (best[a][0] > 1e29 && best[a][1] > 1e29 && best[a][2] > 1e29) continue;
            printf("search %dx%d id %3d:", O, I, ids[a]);
            for (int ri = 0; ri < 3; ri++)
                printf("  %4d rows %8.1f us (tile %3d stages %3d)", rows[ri], best[a][ri] > 1e29 ? -1.0 : best[a][ri], cfg[a][ri][0], cfg[a][ri][1]);
            printf("\n");
        }
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatmulDescDestroy(desc);
    }
}

/* --skinny: per decode product of 124M and 1558M that gpt2__skinny_kernel may serve (qkv, proj pieces, fc with GELU,
   fc-proj pieces, lm_head) in F16 and BF16, at 1, 3, 8 and 16 rows: gpt2__skinny_kernel against the engine's
   cuBLASLt path for decode rows (gpt2__decode_lt), how many output elements differ in their bits, and both timed
   (graph_us; with PDL on sm_90, as the engine launches it). */
/* The decode products of a model of width C as the engine runs them (lm_head with the 124M/1558M vocabulary
   rounded up to 8): name, output width, K, epilogue, fp32 pieces or not, pieces of K. */
typedef struct { const char *what; int O, I, epi, f32, splits; } sk_product;
static void sk_products(int C, sk_product p[5]) {
    p[0] = {"qkv", 3 * C, C, GPT2__EPI_BIAS, 0, 1};
    p[1] = {"proj", C, C, GPT2__EPI_NONE, 1, gpt2__decode_splits(C)};
    p[2] = {"fc", 4 * C, C, GPT2__EPI_BIAS_GELU, 0, 1};
    p[3] = {"fcproj", C, 4 * C, GPT2__EPI_NONE, 1, gpt2__decode_splits(4 * C)};
    p[4] = {"lm_head", 50264, C, GPT2__EPI_NONE, 1, 1};
}
/* Per call of fn(i), in microseconds, with cold weights: 40 calls in one CUDA graph (graph_calls_us), call i on copy
   i % copies of the weights (copies x bytes well past the 50 MB L2). */
template <typename F> static double cold_us(cudaStream_t st, F fn) { return graph_calls_us(st, 40, fn); }
/* --skinny's cold table: one row, F16, every decode product of 124M and 1558M (fc: cuBLASLt with its own GELU
   epilogue, as before the engine took its own GELU, against the kernel with bias and gpt2__gelu), weights cold
   (cold_us). */
static void skinny_cold(gpt2__cuda_state *S) {
    const int Cs[] = {768, 1600};
    __half *X, *b;
    char *D;
    CU(cudaMalloc(&X, (size_t)16 * 6400 * 2)); CU(cudaMalloc(&b, 6400 * 2)); CU(cudaMalloc(&D, (size_t)16 * 50264 * 4));
    fill_random_t<__half><<<64, 256>>>(X, (size_t)16 * 6400, 12, 4.0f);
    fill_random_t<__half><<<8, 256>>>(b, 6400, 13, 1.0f);
    for (int ci = 0; ci < 2; ci++) {
        const int C = Cs[ci];
        sk_product sh[5];
        sk_products(C, sh);
        for (int si = 0; si < 5; si++) {
            const int O = sh[si].O, I = sh[si].I, f32 = sh[si].f32, sp = sh[si].splits, epi = sh[si].epi;
            const size_t wb = (size_t)O * I * 2;
            int copies = (int)((size_t)(400 << 20) / wb);
            if (copies > 40) copies = 40;
            if (copies < 3) copies = 3;
            __half *W;
            CU(cudaMalloc(&W, wb * copies));
            fill_random_t<__half><<<1024, 256>>>(W, (size_t)O * I, 31, 0.25f);
            for (int c = 1; c < copies; c++) CU(cudaMemcpy((char *)W + c * wb, W, wb, cudaMemcpyDeviceToDevice));
            auto wk = [&](int i) { return (const __half *)((const char *)W + (size_t)(i % copies) * wb); };
            const double lt = cold_us(S->stream, [&](int i) {
                return gpt2__gemm_run(S, CUDA_R_16F, D, wk(i), X, epi ? b : NULL, O, 1, I, epi, f32, O, GPT2_GEMM_REF_ROWS, sp) == GPT2_OK; });
            const double sk = cold_us(S->stream, [&](int i) {
                return gpt2__skinny_run<__half>(S->stream, S->pdl, D, wk(i), X, epi ? b : NULL, O, 1, I, f32, O, sp, epi == GPT2__EPI_BIAS_GELU) ==
                       GPT2_OK; });
            printf("skinny cold C=%4d %-7s %5dx%-5d pieces %d (%d copies): cuBLASLt %6.1f us (%.2f TB/s)  skinny %6.1f us (%.2f TB/s)%s\n", C,
                   sh[si].what, O, I, sp, copies, lt, wb / lt * 1e-6, sk, wb / sk * 1e-6, epi == GPT2__EPI_BIAS_GELU ? "  (cuBLASLt: its GELU epilogue; skinny: bias, then gpt2__gelu)" : "");
            cudaFree(W);
        }
    }
    cudaFree(X); cudaFree(b); cudaFree(D);
}
template <typename T> static void skinny_dtype(gpt2__cuda_state *S, const char *name) {
    CHECK(gpt2__skinny_enable<T>());
    const int Cs[] = {768, 1600}, rows[] = {1, 3, 8, 16};
    T *W, *X, *b;
    char *D1, *D2;
    const size_t wmax = (size_t)50264 * 1600;
    CU(cudaMalloc(&W, wmax * sizeof(T))); CU(cudaMalloc(&X, (size_t)16 * 6400 * sizeof(T))); CU(cudaMalloc(&b, 6400 * sizeof(T)));
    CU(cudaMalloc(&D1, (size_t)16 * 50264 * 4)); CU(cudaMalloc(&D2, (size_t)16 * 50264 * 4));
    fill_random_t<T><<<1024, 256>>>(W, wmax, 11, 0.25f); fill_random_t<T><<<64, 256>>>(X, (size_t)16 * 6400, 12, 4.0f);
    fill_random_t<T><<<8, 256>>>(b, 6400, 13, 1.0f);
    char *h1 = (char *)malloc((size_t)16 * 50264 * 4), *h2 = (char *)malloc((size_t)16 * 50264 * 4);
    for (int ci = 0; ci < 2; ci++) {
        const int C = Cs[ci];
        sk_product sh[5];
        sk_products(C, sh);
        for (int si = 0; si < 5; si++)
            for (int ri = 0; ri < 4; ri++) {
                const int O = sh[si].O, I = sh[si].I, n = rows[ri], f32 = sh[si].f32, sp = sh[si].splits, epi = sh[si].epi;
                if (!gpt2__skinny_fits(O, n, I, sp, sizeof(T))) { printf("skinny %s C=%d %s n=%d: does not fit\n", name, C, sh[si].what, n); continue; }
                const size_t bytes = (size_t)sp * n * O * (f32 ? 4 : sizeof(T));
                CU(cudaMemset(D1, 0x7f, bytes)); CU(cudaMemset(D2, 0x3f, bytes));
                auto lt = [&]() { return gpt2__decode_lt<T>(S, D1, W, X, epi ? b : NULL, O, n, I, epi, f32, O, sp) == GPT2_OK; };
                auto sk = [&]() {
                    return gpt2__skinny_run<T>(S->stream, S->pdl, D2, W, X, epi ? b : NULL, O, n, I, f32, O, sp, epi == GPT2__EPI_BIAS_GELU) == GPT2_OK;
                };
                CHECK(lt()); CHECK(sk());
                CU(cudaStreamSynchronize(S->stream));
                CU(cudaMemcpy(h1, D1, bytes, cudaMemcpyDeviceToHost)); CU(cudaMemcpy(h2, D2, bytes, cudaMemcpyDeviceToHost));
                const size_t es = f32 ? 4 : sizeof(T), ne = bytes / es;
                size_t diff = 0, first = (size_t)-1;
                for (size_t e = 0; e < ne; e++)
                    if (memcmp(h1 + e * es, h2 + e * es, es)) { diff++; if (first == (size_t)-1) first = e; }
                const double t1 = graph_us(S->stream, lt), t2 = graph_us(S->stream, sk);
                printf("skinny %s C=%4d %-7s %5dx%-5d splits %d n=%2d: %zu of %zu differ  cuBLASLt %6.1f us  skinny %6.1f us (%.2f TB/s)", name, C,
                       sh[si].what, O, I, sp, n, diff, ne, t1, t2, (double)O * I * sizeof(T) / t2 * 1e-6);
                if (diff) {
                    double a, c;
                    if (f32) { a = ((float *)h1)[first]; c = ((float *)h2)[first]; }
                    else { T x, y; memcpy(&x, h1 + first * es, es); memcpy(&y, h2 + first * es, es); a = (float)x; c = (float)y; }
                    printf("  first at %zu: %.9g vs %.9g", first, a, c);
                }
                printf("\n");
            }
    }
    free(h1); free(h2);
    cudaFree(W); cudaFree(X); cudaFree(b); cudaFree(D1); cudaFree(D2);
}
/* --skinny-det SIZE: whether each few-row decode product (qkv, the projection's K pieces, the MLP's first with GELU,
   its second's pieces, the logits; layer 0's weights) and its cuBLASLt reference give the same bits run after run:
   each run 30 times at 1 and 16 rows on the same random rows, every output against that side's first; then the
   two sides' first outputs against each other (what gpt2__skinny_check compares once at load). */
template <typename T> static void skinny_det_t(const char *size, gpt2_dtype dt) {
    gpt2_model *m = random_model(size, dt, 1, 1024, 0);
    CHECK(m);
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    printf("%s %s: %d of 5 products on the few-row kernel after the check at load\n", size, gpt2__dtype_name(dt), S->sk_n);
    const int F = m->n_inner, R = GPT2__SK_ROWS, reps = 30;
    gpt2__sk_product pr[5];
    gpt2__sk_products(m, S, pr);
    std::vector<T> hx((size_t)R * (F > m->cfg.n_embd ? F : m->cfg.n_embd));
    uint32_t r = 777u;
    for (auto &v : hx) { r = r * 1664525u + 1013904223u; v = (T)(4.0f * ((float)(r >> 8) / 16777216.0f - 0.5f)); }
    T *dx;
    CU(cudaMalloc(&dx, hx.size() * sizeof(T)));
    /* on S->stream (non-blocking), as gpt2__skinny_check: a plain cudaMemcpy may return before its DMA lands */
    CU(cudaMemcpyAsync(dx, hx.data(), hx.size() * sizeof(T), cudaMemcpyHostToDevice, S->stream));
    for (int k = 0; k < 5; k++)
        for (int n = 1; n <= R; n += R - 1) {
            const int O = pr[k].O, I = pr[k].I, sp = pr[k].sp, gelu = pr[k].epi == GPT2__EPI_BIAS_GELU;
            const size_t bytes = (size_t)sp * n * O * (pr[k].f32 ? 4 : sizeof(T));
            std::vector<unsigned char> first[2], now(bytes);
            void *d;
            CU(cudaMalloc(&d, bytes));
            int vary[2] = {0, 0};
            for (int rep = 0; rep <= reps; rep++)
                for (int side = 0; side < 2; side++) {
                    CU(cudaMemsetAsync(d, rep & 1 ? 0xff : 0, bytes, S->stream));
                    if (side == 0) CHECK(gpt2__decode_lt<T>(S, d, pr[k].W, dx, pr[k].b, O, n, I, pr[k].epi, pr[k].f32, O, sp) == GPT2_OK);
                    else if constexpr (sizeof(T) == 2)
                        CHECK(gpt2__skinny_go<T>(S, S->stream, 0, d, (const T *)pr[k].W, dx, (const T *)pr[k].b, O, n, I, pr[k].f32, O, sp, gelu) ==
                              GPT2_OK);
                    else
                        CHECK(gpt2__sk32_run(S->stream, 0, d, (const float *)pr[k].W, (const float *)dx, pr[k].f32 ? NULL : (const float *)pr[k].b,
                                             O, n, I, O, sp, gelu, gpt2__sk32_cols(O, sp, S->sms)) == GPT2_OK);
                    CU(cudaStreamSynchronize(S->stream));
                    CU(cudaMemcpy(now.data(), d, bytes, cudaMemcpyDeviceToHost));
                    if (rep == 0) first[side] = now;
                    else vary[side] += memcmp(now.data(), first[side].data(), bytes) != 0;
                }
            size_t ne = bytes / 4, diff = 0; /* 4-byte words that differ between the two sides' first runs */
            for (size_t i = 0; i < ne; i++) diff += memcmp(&first[0][4 * i], &first[1][4 * i], 4) != 0;
            printf("  %-7s %5d x %4d / %d pieces, %2d rows: cuBLASLt differs from its first run in %2d of %d runs, the kernel in %2d; "
                   "first runs: %zu of %zu words differ\n", pr[k].name, O, I, sp, n, vary[0], reps, vary[1], diff, ne);
            cudaFree(d);
        }
    cudaFree(dx);
    gpt2_free(m);
}
static void skinny_det(const char *size, gpt2_dtype dt) {
    if (dt == GPT2_DTYPE_F32) skinny_det_t<float>(size, dt);
    else if (dt == GPT2_DTYPE_BF16) skinny_det_t<__nv_bfloat16>(size, dt);
    else skinny_det_t<__half>(size, dt);
}

static void skinny_table(void) {
    gpt2__cuda_state S0, *S = &S0;
    bare_state(S);
    if (getenv("SKINNY_ONE")) { /* for ncu: 1558M's qkv at one row, five times */
        CHECK(gpt2__skinny_enable<__half>());
        __half *W, *X, *b, *D;
        CU(cudaMalloc(&W, (size_t)4800 * 1600 * 2)); CU(cudaMalloc(&X, 1600 * 2)); CU(cudaMalloc(&b, 4800 * 2)); CU(cudaMalloc(&D, 4800 * 2));
        for (int k = 0; k < 5; k++) CHECK(gpt2__skinny_run<__half>(S->stream, 0, D, W, X, b, 4800, 1, 1600, 0, 4800, 1) == GPT2_OK);
        CU(cudaStreamSynchronize(S->stream));
        return;
    }
    skinny_dtype<__half>(S, "f16");
    skinny_dtype<__nv_bfloat16>(S, "bf16");
    skinny_cold(S);
}

/* --gelu-match: which GELU formula cuBLASLt's GELU_BIAS epilogue computes. The fc product of 124M at 16 rows: raw
   fp32 sums from gpt2__skinny_kernel (bit-identical to cuBLASLt's, --skinny), + bias, through each candidate formula,
   rounded to T, against cuBLASLt's output; per candidate the count of differing elements, the best GM_SHOW printed.
   A candidate c is (z, tail, u, k): z 0 the fp32 sum + bias as is, 1 rounded to T first; u how the tanh argument is
   evaluated (12 orders); k the constants' last bits (k0, k1 each -1, 0, +1 ulp); tail how the argument becomes the
   result: tanh by tanhf / tanh.approx.f32 / 1 - 2/(e^2u + 1) / the same with ex2.approx and rcp.approx / (e - 1)/(e + 1)
   with __fdividef, each combined with x in 8 orders, or x * sigmoid(2u) in 6 forms. */
static __device__ float gm_ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
static __device__ float gm_rcp(float x) { float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
static __device__ float gm_tanh(float u, int how) {
    if (how == 0) return tanhf(u);
    if (how == 1) { float y; asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(u)); return y; }
    if (how == 2) return __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(__expf(__fmul_rn(2.0f, u)), 1.0f)));
    if (how == 3) return __fsub_rn(1.0f, __fmul_rn(2.0f, gm_rcp(__fadd_rn(gm_ex2(__fmul_rn(2.8853900817779268f, u)), 1.0f))));
    const float e = gm_ex2(__fmul_rn(2.8853900817779268f, u));
    return __fdividef(__fsub_rn(e, 1.0f), __fadd_rn(e, 1.0f));
}
static __device__ float gm_u(float x, int uh, float k0, float k1) {
    const float k01 = __fmul_rn(k0, k1);
    switch (uh) {
    case 0: return __fmul_rn(k0, __fmaf_rn(__fmul_rn(k1, x), __fmul_rn(x, x), x));
    case 1: return __fmul_rn(k0, __fmaf_rn(k1, __fmul_rn(__fmul_rn(x, x), x), x));
    case 2: return __fmul_rn(k0, __fmaf_rn(__fmul_rn(__fmul_rn(k1, x), x), x, x));
    case 3: return __fmul_rn(k0, __fadd_rn(x, __fmul_rn(__fmul_rn(__fmul_rn(k1, x), x), x)));
    case 4: return __fmul_rn(__fmul_rn(k0, x), __fmaf_rn(__fmul_rn(k1, x), x, 1.0f));
    case 5: return __fmul_rn(__fmul_rn(k0, x), __fadd_rn(1.0f, __fmul_rn(__fmul_rn(k1, x), x)));
    case 6: return __fmul_rn(__fmul_rn(k0, x), __fmaf_rn(k1, __fmul_rn(x, x), 1.0f));
    case 7: return __fmul_rn(x, __fmaf_rn(k01, __fmul_rn(x, x), k0));
    case 8: return __fmaf_rn(__fmul_rn(k01, x), __fmul_rn(x, x), __fmul_rn(k0, x));
    case 9: return __fmaf_rn(__fmul_rn(__fmul_rn(k01, x), x), x, __fmul_rn(k0, x));
    case 10: return __fmul_rn(k0, __fmaf_rn(__fmul_rn(__fmul_rn(x, x), x), k1, x));
    default: return __fmul_rn(x, __fmul_rn(k0, __fmaf_rn(k1, __fmul_rn(x, x), 1.0f)));
    }
}
static __device__ float gm_tail(float x, float u, int tl) {
    if (tl < 40) {
        const float t = gm_tanh(u, tl / 8), h = __fmul_rn(0.5f, x);
        switch (tl % 8) {
        case 0: return __fmaf_rn(h, t, h);
        case 1: return __fmul_rn(h, __fadd_rn(1.0f, t));
        case 2: return __fmul_rn(x, __fmaf_rn(0.5f, t, 0.5f));
        case 3: return __fmul_rn(0.5f, __fmaf_rn(x, t, x));
        case 4: return __fmaf_rn(__fmul_rn(x, t), 0.5f, h);
        case 5: return __fmul_rn(__fadd_rn(x, __fmul_rn(x, t)), 0.5f);
        case 6: return __fmul_rn(__fmul_rn(x, __fadd_rn(1.0f, t)), 0.5f);
        default: return __fmul_rn(__fmul_rn(0.5f, __fadd_rn(1.0f, t)), x);
        }
    }
    switch (tl - 40) { /* x * sigmoid(2u) */
    case 0: return __fdiv_rn(x, __fadd_rn(1.0f, __expf(__fmul_rn(-2.0f, u))));
    case 1: return __fmul_rn(x, __frcp_rn(__fadd_rn(1.0f, __expf(__fmul_rn(-2.0f, u)))));
    case 2: return __fdividef(x, __fadd_rn(1.0f, __expf(__fmul_rn(-2.0f, u))));
    case 3: return __fmul_rn(x, gm_rcp(__fadd_rn(1.0f, gm_ex2(__fmul_rn(-2.8853900817779268f, u)))));
    case 4: return __fdiv_rn(x, __fadd_rn(1.0f, gm_ex2(__fmul_rn(-2.8853900817779268f, u))));
    default: return __fmul_rn(x, gm_rcp(__fadd_rn(1.0f, __expf(__fmul_rn(-2.0f, u)))));
    }
}
static unsigned __float_as_uint_h(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
#define GM_TAILS 46
#define GM_KN 7 /* each constant from -3 to +3 ulps */
#define GM_CANDS (2 * GM_TAILS * 12 * GM_KN * GM_KN)
#define GM_SHOW 12
static unsigned gm_total[2][GM_CANDS];
template <typename T> static __device__ float gm_gelu(float x, int c) {
    const int KK = GM_KN * GM_KN, z = c / (GM_TAILS * 12 * KK), tl = (c / (12 * KK)) % GM_TAILS, uh = (c / KK) % 12, kk = c % KK;
    if (z) { T r; gpt2__put(&r, x); x = gpt2__f(r); }
    const float k0 = __uint_as_float(__float_as_uint(0.7978845608028654f) + kk % GM_KN - GM_KN / 2);
    const float k1 = __uint_as_float(__float_as_uint(0.044715f) + kk / GM_KN - GM_KN / 2);
    return gm_tail(x, gm_u(x, uh, k0, k1), tl);
}
template <typename T>
__global__ void gm_count(const float *acc, const T *bias, const T *ref, int O, int n, unsigned *miss, float *ex, int want) {
    const int c = want >= 0 ? want : blockIdx.x;
    unsigned cnt = 0;
    for (int i = threadIdx.x; i < n * O; i += blockDim.x) {
        const float x = acc[i] + gpt2__f(bias[i % O]);
        T y;
        const float g = gm_gelu<T>(x, c);
        gpt2__put(&y, g);
        if (*(unsigned short *)&y != *(const unsigned short *)&ref[i]) {
            cnt++;
            if (want >= 0) {
                const unsigned k = atomicAdd(&miss[0], 1u);
                if (k < 24) { ex[4 * k] = x; ex[4 * k + 1] = gpt2__f(ref[i]); ex[4 * k + 2] = gpt2__f(y); ex[4 * k + 3] = g; }
            }
        }
    }
    if (want < 0) atomicAdd(&miss[c], cnt);
}
template <typename T> static void gelu_match_dtype(gpt2__cuda_state *S, const char *name, uint32_t seed) {
    const cudaDataType_t dt = gpt2__cuda_type<T>::id;
    CHECK(gpt2__skinny_enable<T>());
    const int O = 3072, I = 768, n = 16;
    T *W, *X, *b, *ref;
    float *acc, *ex;
    unsigned *miss;
    CU(cudaMalloc(&W, (size_t)O * I * sizeof(T))); CU(cudaMalloc(&X, (size_t)n * I * sizeof(T))); CU(cudaMalloc(&b, O * sizeof(T)));
    CU(cudaMalloc(&ref, (size_t)n * O * sizeof(T))); CU(cudaMalloc(&acc, (size_t)n * O * 4)); CU(cudaMalloc(&miss, GM_CANDS * 4));
    CU(cudaMalloc(&ex, 96 * 4));
    fill_random_t<T><<<1024, 256>>>(W, (size_t)O * I, seed + 21, 0.25f); fill_random_t<T><<<64, 256>>>(X, (size_t)n * I, seed + 22, 4.0f);
    fill_random_t<T><<<8, 256>>>(b, O, seed + 23, 1.0f);
    CHECK(gpt2__gemm_run(S, dt, ref, W, X, b, O, n, I, GPT2__EPI_BIAS_GELU, 0, O, GPT2_GEMM_REF_ROWS, 1) == GPT2_OK);
    CHECK(gpt2__skinny_run<T>(S->stream, 0, acc, W, X, NULL, O, n, I, 1, O, 1) == GPT2_OK);
    CU(cudaMemsetAsync(miss, 0, GM_CANDS * 4, S->stream));
    gm_count<T><<<GM_CANDS, 256, 0, S->stream>>>(acc, b, ref, O, n, miss, ex, -1);
    CU(cudaStreamSynchronize(S->stream));
    static unsigned h[GM_CANDS];
    static int order[GM_CANDS];
    CU(cudaMemcpy(h, miss, sizeof h, cudaMemcpyDeviceToHost));
    for (int c = 0; c < GM_CANDS; c++) order[c] = c, gm_total[sizeof(T) == 2 && dt == CUDA_R_16BF][c] += h[c];
    for (int i = 0; i < GM_SHOW; i++) /* partial selection sort: the GM_SHOW fewest misses */
        for (int j = i + 1; j < GM_CANDS; j++)
            if (h[order[j]] < h[order[i]]) { const int t = order[i]; order[i] = order[j]; order[j] = t; }
    for (int i = 0; i < GM_SHOW; i++) {
        const int c = order[i];
        printf("gelu %s seed %u candidate %4d (z %d, tail %2d, u %2d, k0 %+d, k1 %+d): %u of %d differ\n", name, seed, c,
               c / (GM_TAILS * 12 * GM_KN * GM_KN), (c / (12 * GM_KN * GM_KN)) % GM_TAILS, (c / (GM_KN * GM_KN)) % 12,
               c % GM_KN - GM_KN / 2, (c % (GM_KN * GM_KN)) / GM_KN - GM_KN / 2, h[c], n * O);
    }
    for (int i = 0; i < 2; i++) {
        CU(cudaMemsetAsync(miss, 0, 4, S->stream));
        gm_count<T><<<1, 256, 0, S->stream>>>(acc, b, ref, O, n, miss, ex, order[i]);
        float e[96];
        unsigned m;
        CU(cudaStreamSynchronize(S->stream));
        CU(cudaMemcpy(e, ex, sizeof e, cudaMemcpyDeviceToHost)); CU(cudaMemcpy(&m, miss, 4, cudaMemcpyDeviceToHost));
        for (unsigned k = 0; k < m && k < 24; k++)
            printf("gelu %s seed %u candidate %4d miss: x %.9g (%08x) cuBLASLt %.9g ours %.9g before rounding %.9g (%08x)\n", name, seed,
                   order[i], e[4 * k], __float_as_uint_h(e[4 * k]), e[4 * k + 1], e[4 * k + 2], e[4 * k + 3], __float_as_uint_h(e[4 * k + 3]));
    }
    cudaFree(W); cudaFree(X); cudaFree(b); cudaFree(ref); cudaFree(acc); cudaFree(miss); cudaFree(ex);
}
static void gelu_match(void) {
    gpt2__cuda_state S0, *S = &S0;
    bare_state(S);
    for (uint32_t seed = 0; seed < 300; seed += 100) {
        gelu_match_dtype<__half>(S, "f16", seed);
        gelu_match_dtype<__nv_bfloat16>(S, "bf16", seed);
    }
    for (int d = 0; d < 2; d++) {
        int best = 0;
        for (int c = 1; c < GM_CANDS; c++)
            if (gm_total[d][c] + gm_total[1 - d][c] / 4 < gm_total[d][best] + gm_total[1 - d][best] / 4) best = c;
        printf("gelu best over all seeds for %s: candidate %d, %u (f16 %u, bf16 %u)\n", d ? "bf16" : "f16", best, gm_total[d][best],
               gm_total[0][best], gm_total[1][best]);
    }
}

/* --class-pool: per decode shape (F16, bias epilogue, K unsplit), the class of the reference (the heuristic's first
   unsplit pick for GPT2_GEMM_REF_ROWS rows), and every candidate of that class the heuristic offers for any row count
   1..4096 (32 each); each member timed (graph_us) at 1, 8, 128, 256 and 1024 rows, and the best member against the
   engine's plan and the row count's own pick. Shows what choosing the class member by timing would give. */
static void class_pool(void) {
    gpt2__cuda_state S0, *S = &S0;
    bare_state(S);
    const int shapes[][2] = {{2304, 768}, {3072, 768}, {4800, 1600}, {6400, 1600}, {1600, 1600}, {50264, 768}};
    const int rows[] = {1, 8, 128, 256, 1024};
    __half *W, *X, *D, *b;
    CU(cudaMalloc(&W, (size_t)50264 * 1600 * 2)); CU(cudaMalloc(&X, (size_t)4096 * 6400 * 2));
    CU(cudaMalloc(&D, (size_t)1024 * 50264 * 4)); CU(cudaMalloc(&b, (size_t)50264 * 2));
    fill_random_t<__half><<<1024, 256>>>(W, (size_t)50264 * 1600, 3, 1.0f); fill_random_t<__half><<<1024, 256>>>(X, (size_t)1024 * 6400, 4, 1.0f);
    fill_random_t<__half><<<256, 256>>>(b, 50264, 5, 1.0f);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int O = shapes[si][0], I = shapes[si][1], logits = O > 10000;
        cublasLtMatmulDesc_t desc = lt_desc(logits ? NULL : b);
        const cudaDataType_t dty = logits ? CUDA_R_32F : CUDA_R_16F;
        cublasLtMatrixLayout_t la;
        cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, I, O, I);
        cublasLtMatmulPreference_t pref;
        cublasLtMatmulPreferenceCreate(&pref);
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &S->lt_ws_size, sizeof S->lt_ws_size);
        cublasLtMatmulAlgo_t pool[512];
        int np = 0, rc[4] = {0, 0, 0, 0};
        for (int N = GPT2_GEMM_REF_ROWS, pass = 0; pass < 14; pass++, N = 1 << (pass - 1)) {
            cublasLtMatrixLayout_t lb, ld;
            cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, I, N, I);
            cublasLtMatrixLayoutCreate(&ld, dty, O, N, O);
            cublasLtMatmulHeuristicResult_t cand[32];
            int nc = 0;
            cublasLtMatmulAlgoGetHeuristic(S->lt, desc, la, lb, ld, ld, pref, 32, cand, &nc);
            for (int i = 0; i < nc; i++) {
                int cc[4];
                gpt2__algo_class(&cand[i].algo, cc);
                if (pass == 0 && !np) { if (cc[1] > 1) continue; memcpy(rc, cc, sizeof rc); }
                if (memcmp(rc, cc, sizeof rc)) continue;
                int dup = 0;
                for (int k = 0; k < np && !dup; k++) dup = !memcmp(&pool[k], &cand[i].algo, sizeof pool[k]);
                if (!dup && np < 512) pool[np++] = cand[i].algo;
            }
            cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
        }
        printf("pool %dx%d: class id %d split %d red %d custom %d, %d members\n", O, I, rc[0], rc[1], rc[2], rc[3], np);
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
            const int N = rows[ri];
            if (logits && N > 256) continue;
            cublasLtMatrixLayout_t lb, ld;
            cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, I, N, I);
            cublasLtMatrixLayoutCreate(&ld, dty, O, N, O);
            const float one = 1.0f, zero = 0.0f;
            double bt = 1e30;
            int bk = -1;
            for (int k = 0; k < np; k++) {
                cublasLtMatmulHeuristicResult_t chk;
                if (cublasLtMatmulAlgoCheck(S->lt, desc, la, lb, ld, ld, &pool[k], &chk) != CUBLAS_STATUS_SUCCESS ||
                    chk.workspaceSize > S->lt_ws_size)
                    continue;
                double us = graph_us(S->stream, [&]() {
                    return cublasLtMatmul(S->lt, desc, &one, W, la, X, lb, &zero, D, ld, D, ld, &pool[k], S->lt_ws, S->lt_ws_size,
                                          S->stream) == CUBLAS_STATUS_SUCCESS;
                });
                if (us < bt) { bt = us; bk = k; }
            }
            int tile = -1, stages = -1;
            size_t sz;
            if (bk >= 0) {
                cublasLtMatmulAlgoConfigGetAttribute(&pool[bk], CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &sz);
                cublasLtMatmulAlgoConfigGetAttribute(&pool[bk], CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &sz);
            }
            double plan = logits ? 0 : time_us(S, 2, D, W, X, b, O, N, I), own = logits ? 0 : time_us(S, 3, D, W, X, b, O, N, I);
            printf("pool %dx%d %5d rows: best member %6.1f us (member %d, tile %d, stages %d); engine plan %6.1f, own pick %6.1f\n",
                   O, I, N, bt, bk, tile, stages, plan, own);
            cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
        }
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatmulDescDestroy(desc);
    }
}

/* --steps SIZE: where a batch-1 decode step's wall time goes (F16, max_seq 1024, after a 128-token prompt), per step
   over 128 steps: the graph replayed back to back (events), each step staged and waited for (gpt2__cuda_step), the
   steps pipelined two deep (gpt2__cuda_launch with feed, then gpt2__cuda_collect), and gpt2_generate itself. */
/* --spec-text DIR [K...]: a published-layout model (e.g. the embedded one) continues a passage greedily, 256 tokens,
   with speculation off and at each K (gpt2_generate's prompt-lookup drafts, gpt2_model.spec): ms per generated token
   (the generate call less a 1-token one, over 255; median of reps), draft rows fed and kept, and whether every token
   equals speculation-off's. */
static void spec_text(const char *dir, gpt2_dtype dt, int reps, const int *ks, int nk) {
    static const int dflt[4] = {2, 4, 6, 8};
    if (!nk) { ks = dflt; nk = 4; }
    static const char *const text =
        "ROMEO:\nBut, soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n"
        "Arise, fair sun, and kill the envious moon,\nWho is already sick and pale with grief,\n"
        "That thou her maid art far more fair than she.\n\nJULIET:\nO Romeo, Romeo! wherefore art thou Romeo?\n"
        "Deny thy father and refuse thy name;\nOr, if thou wilt not, be but sworn my love,\n"
        "And I'll no longer be a Capulet.\n\nROMEO:\n";
    gpt2_options o = gpt2_default_options();
    o.backend = GPT2_BACKEND_CUDA; o.dtype = dt; o.max_batch = 1;
    gpt2_model *m;
    gpt2_tokenizer *tk;
    CHECK(gpt2_load(&m, dir, &o) == GPT2_OK && gpt2_tokenizer_load(&tk, dir) == GPT2_OK);
    int prompt[512], ref[256], out[256];
    const int P = gpt2_encode(tk, text, strlen(text), prompt, 512), G = 256;
    CHECK(P > 0 && P <= 512);
    gpt2_config c = gpt2_model_config(m);
    printf("spec-text %s (%d layers, width %d, %s), prompt %d tokens, %d new, greedy, batch 1\n", dir, c.n_layer, c.n_embd,
           gpt2__dtype_name(m->dtype), P, G);
    if (reps > 16) reps = 16;
    for (int v = -1; v < nk; v++) {
        m->spec = v < 0 ? 0 : ks[v];
        double t[16];
        long long rows = 0, kept = 0;
        int same = 1;
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
            gpt2_request q;
            memset(&q, 0, sizeof q);
            q.prompt = prompt; q.prompt_len = P; q.max_new_tokens = 1; q.stop_token = -1; q.out = out;
            CU(cudaDeviceSynchronize());
            double t0 = now_s();
            CHECK(gpt2_generate(m, &q, 1, NULL, NULL) == GPT2_OK);
            const double t1 = now_s() - t0;
            q.max_new_tokens = G;
            const long long r0 = m->spec_rows, k0 = m->spec_kept;
            t0 = now_s();
            CHECK(gpt2_generate(m, &q, 1, NULL, NULL) == GPT2_OK);
            const double tg = now_s() - t0;
            rows = m->spec_rows - r0; kept = m->spec_kept - k0;
            if (v < 0) memcpy(ref, out, sizeof ref);
            else same = same && !memcmp(ref, out, sizeof ref) && q.n_out == G;
            if (r >= 0) t[r] = (tg - t1) / (G - 1);
        }
        printf("  spec %d: %.4f ms/token   draft rows %lld, kept %lld (%.0f%%), %.2f tokens a step   %s\n", m->spec,
               median(t, reps) * 1e3, rows, kept, rows ? 100.0 * kept / rows : 0.0, (double)G / (G - kept), v < 0 ? "(reference)" : same ? "same tokens" : "TOKENS DIFFER");
        if (v < 0) {
            char txt[4096];
            int n = gpt2_decode(tk, ref, 64, txt, sizeof txt);
            if (n > 0 && n < (int)sizeof txt) { txt[n] = 0; printf("  (its first 64 tokens: %s)\n", txt); }
        }
    }
    gpt2_tokenizer_free(tk);
    gpt2_free(m);
}

/* --spec-steps SIZE: the wall time of a batch-1 step of 1 + d decode rows of one sequence (a draft of d tokens to
   verify, as gpt2_generate's speculation feeds it; d = 0 is the plain decode step, a graph) at position 192, each step
   launched and waited for (gpt2__cuda_step); median of 5 rounds of 50. */
static void spec_steps(const char *size) {
    gpt2_model *m = random_model(size, GPT2_DTYPE_F16, 1, 1024, 0);
    CHECK(m);
    run_generate(m, 1, 128, 72); /* slot 0's cache through position 199 */
    static const int ds[8] = {0, 1, 2, 3, 5, 7, 11, 15};
    int tok[16], next[16];
    for (int j = 0; j < 16; j++) tok[j] = (int)((j * 7919u + 13u) % 50257u);
    printf("spec-steps %s: batch-1 step of 1 + d rows at position 192 (launched and waited for)\n", size);
    for (int v = 0; v < 8; v++) {
        const int n = 1 + ds[v];
        gpt2__seq q[16];
        memset(q, 0, sizeof q);
        for (int j = 0; j < n; j++) { q[j].slot = 0; q[j].pos = 192 + j; q[j].n_tok = 1; q[j].tok = &tok[j]; q[j].sample = 1; q[j].draw = (uint64_t)j; q[j].spec = j; }
        double t[5];
        for (int r = 0; r < 3; r++) CHECK(gpt2__cuda_step(m, q, n, next) == GPT2_OK);
        for (int r = 0; r < 5; r++) {
            const double t0 = now_s();
            for (int k = 0; k < 50; k++) CHECK(gpt2__cuda_step(m, q, n, next) == GPT2_OK);
            t[r] = (now_s() - t0) / 50;
        }
        printf("  d %2d: %.4f ms a step\n", ds[v], median(t, 5) * 1e3);
    }
    gpt2_free(m);
}

static void step_timing(const char *size) {
    gpt2_model *m = random_model(size, GPT2_DTYPE_F16, 1, 1024, 0);
    CHECK(m);
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    int tok[128], next[1];
    for (int i = 0; i < 128; i++) tok[i] = (i * 7919 + 13) % 50257;
    gpt2__seq q;
    memset(&q, 0, sizeof q);
    q.n_tok = 128; q.tok = tok; q.prompt = 1; q.sample = 1;
    const int K = 128;
    for (int rep = 0; rep < 2; rep++) {
        q.pos = 0; q.n_tok = 128; q.tok = tok; q.prompt = 1;
        CHECK(gpt2__cuda_step(m, &q, 1, next) == GPT2_OK);
        q.pos = 128; q.n_tok = 1; q.prompt = 0; q.tok = next;
        double t0 = now_s();
        for (int k = 0; k < K; k++, q.pos++) CHECK(gpt2__cuda_step(m, &q, 1, next) == GPT2_OK);
        const double sync_ms = (now_s() - t0) * 1e3 / K;
        q.pos = 128;
        t0 = now_s();
        CHECK(gpt2__cuda_launch(m, &q, 1, 0) == GPT2_OK);
        for (int k = 1; k < K; k++) {
            q.pos++;
            CHECK(gpt2__cuda_launch(m, &q, 1, 1) == GPT2_OK);
            CHECK(gpt2__cuda_collect(m, next) == GPT2_OK);
        }
        CHECK(gpt2__cuda_collect(m, next) == GPT2_OK);
        const double pipe_ms = (now_s() - t0) * 1e3 / K;
        /* the device blob at position 127: each replay's sampler advances it (gpt2__advance), so the K replays below run
           at positions 128..255, as the loops above */
        q.pos = 127;
        CHECK(gpt2__cuda_step(m, &q, 1, next) == GPT2_OK);
        gpt2__cuda_meta d = gpt2__meta_at(S->d_meta, 1, 1, 1);
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0); cudaEventCreate(&e1);
        cudaEventRecord(e0, S->stream);
        for (int k = 0; k < K; k++) CHECK(gpt2__cuda_decode_graph(m, &d, 1, 1) == GPT2_OK);
        cudaEventRecord(e1, S->stream);
        CU(cudaEventSynchronize(e1));
        float graph_ms;
        cudaEventElapsedTime(&graph_ms, e0, e1);
        cudaEventDestroy(e0); cudaEventDestroy(e1);
        const double gen_ms = (run_generate(m, 1, 128, 129) - run_generate(m, 1, 128, 1)) * 1e3 / K;
        if (rep) printf("steps %-6s batch 1 (ms per step): graph back to back %.3f, staged + waited %.3f, pipelined %.3f, "
                        "gpt2_generate %.3f\n", size, graph_ms / K, sync_ms, pipe_ms, gen_ms);
    }
    gpt2_free(m);
}

/* --pre KIND, a diagnostic for RESULTS.md items 100 and 101 (on the H100, decode steps replayed from graphs with
   programmatic launch run ~1-2% slower after some earlier GPU work in the process). Before the workloads:
     model      makes and frees a 124M model of batch 1, as the latency workload does; kept: makes one and keeps it
     green      makes and drops the split's green contexts alone
     streams    makes and destroys 12 streams and 13 events, no work in them
     fill:B:GB  writes GB GiB of device memory with byte B, then frees it
     h2d        copies 520 MB from pageable host memory, in 4 pieces
     copies:N   N copies of 3..12 KB from pageable host memory into a stream of its own, each waited for
     memsets:N  N memsets of 3..12 KB in a stream of its own, each waited for (memsets0:N: in the legacy stream)
     used:K     K streams of their own, one 4 KB memset each
     kernels:N  N launches of a one-block kernel in a stream of its own, each waited for */
__global__ void pre_touch(unsigned *p, int i) { p[threadIdx.x] += (unsigned)i; }
static const char *g_pre = NULL;
static gpt2_model *g_pre_kept = NULL;
static void pre_action(gpt2_dtype dt) {
    if (!g_pre) return;
    const char *arg = strchr(g_pre, ':');
    const int n = arg ? atoi(arg + 1) : 0;
    const size_t small = (size_t)1 << 20;
    if (!strcmp(g_pre, "model") || !strcmp(g_pre, "kept")) {
        gpt2_model *m = random_model("124M", dt, 1, 1024, 0);
        CHECK(m);
        if (!strcmp(g_pre, "kept")) g_pre_kept = m;
        else gpt2_free(m);
    } else if (!strcmp(g_pre, "green")) {
        gpt2__cuda_state *S = (gpt2__cuda_state *)gpt2__zalloc(sizeof *S);
        S->device = 0;
        printf("--pre green: split %d SMs\n", gpt2__green_make(S, gpt2__att_sms_default(0)) ? S->green_sms : 0);
        gpt2__green_make(S, 0);
        free(S);
    } else if (!strcmp(g_pre, "streams")) {
        cudaStream_t st[12];
        cudaEvent_t ev[13];
        for (int i = 0; i < 12; i++) CU(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
        for (int i = 0; i < 13; i++) CU(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
        for (int i = 0; i < 12; i++) CU(cudaStreamDestroy(st[i]));
        for (int i = 0; i < 13; i++) CU(cudaEventDestroy(ev[i]));
    } else if (!strncmp(g_pre, "fill:", 5)) {
        int byte = 0, gb = 40;
        sscanf(g_pre, "fill:%i:%i", &byte, &gb);
        void *p = NULL;
        CU(cudaMalloc(&p, (size_t)gb << 30));
        CU(cudaMemset(p, byte, (size_t)gb << 30));
        CU(cudaDeviceSynchronize());
        CU(cudaFree(p));
    } else if (!strcmp(g_pre, "h2d")) {
        const size_t b = (size_t)130 << 20;
        char *h = (char *)malloc(4 * b);
        memset(h, 1, 4 * b);
        void *p = NULL;
        CU(cudaMalloc(&p, b));
        for (int i = 0; i < 4; i++) CU(cudaMemcpy(p, h + i * b, b, cudaMemcpyHostToDevice));
        CU(cudaFree(p));
        free(h);
    } else if (!strncmp(g_pre, "copies:", 7) || !strncmp(g_pre, "memsets", 7)) {
        const int copy = g_pre[0] == 'c', legacy = !strncmp(g_pre, "memsets0:", 9);
        char *h = (char *)malloc(small);
        memset(h, 1, small);
        void *p = NULL;
        cudaStream_t st = NULL;
        if (!legacy) CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        CU(cudaMalloc(&p, small));
        for (int i = 0; i < n; i++) {
            const size_t b = (size_t)3072 << (i % 3);
            if (copy) CU(cudaMemcpyAsync(p, h, b, cudaMemcpyHostToDevice, st));
            else CU(cudaMemsetAsync(p, i, b, st));
            CU(cudaStreamSynchronize(st));
        }
        CU(cudaFree(p));
        if (st) CU(cudaStreamDestroy(st));
        free(h);
    } else if (!strncmp(g_pre, "kernels:", 8)) {
        unsigned *p = NULL;
        cudaStream_t st;
        CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        CU(cudaMalloc(&p, 4096));
        for (int i = 0; i < n; i++) {
            pre_touch<<<1, 256, 0, st>>>(p, i);
            CU(cudaGetLastError());
            CU(cudaStreamSynchronize(st));
        }
        CU(cudaFree(p));
        CU(cudaStreamDestroy(st));
    } else if (!strncmp(g_pre, "used:", 5)) {
        void *p = NULL;
        CU(cudaMalloc(&p, 4096));
        for (int i = 0; i < n; i++) {
            cudaStream_t st;
            CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
            CU(cudaMemsetAsync(p, i, 4096, st));
            CU(cudaStreamSynchronize(st));
            CU(cudaStreamDestroy(st));
        }
        CU(cudaFree(p));
    } else {
        printf("--pre %s: unknown\n", g_pre);
        exit(1);
    }
    printf("--pre %s done\n", g_pre);
}

int main(int argc, char **argv) {
    const char *sizes[8];
    int ns = 0, reps = 3;
    gpt2_dtype dt = GPT2_DTYPE_F16;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            i++;
            dt = !strcmp(argv[i], "bf16") ? GPT2_DTYPE_BF16 : !strcmp(argv[i], "f32") ? GPT2_DTYPE_F32 : GPT2_DTYPE_F16;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-lookahead")) g_lookahead = 0;
        else if (!strcmp(argv[i], "--no-pdl")) g_pdl = 0;
        else if (!strcmp(argv[i], "--prefill-pair") && i + 1 < argc) { prefill_pair(argv[i + 1], dt, reps); return 0; }
        else if (!strcmp(argv[i], "--no-skinny")) g_skinny = 0;
        else if (!strcmp(argv[i], "--no-lnf")) g_lnf = 0;
        else if (!strcmp(argv[i], "--no-lnf-fit")) g_lnf_fit = 0;
        else if (!strcmp(argv[i], "--no-gather")) g_gather = 0;
        else if (!strcmp(argv[i], "--no-stage")) g_stage = 0;
        else if (!strcmp(argv[i], "--no-att-mma")) g_att_mma = 0;
        else if (!strcmp(argv[i], "--no-hold")) g_hold = 0;
        else if (!strcmp(argv[i], "--parts") && i + 1 < argc) g_parts = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--part-rows") && i + 1 < argc) g_part_rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--att-sms") && i + 1 < argc) g_att_sms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--split-ctx") && i + 1 < argc) g_split_ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--att-ns") && i + 1 < argc) g_att_ns = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--att-tma") && i + 1 < argc) g_att_tma = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefill-order") && i + 1 < argc) g_prefill_order = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefill-seqs") && i + 1 < argc) {
            g_prefill_seqs = atoi(argv[++i]);
            if (g_prefill_seqs < 1 || g_prefill_seqs > 64) { fprintf(stderr, "--prefill-seqs takes 1 to 64\n"); return 2; }
        }
        else if (!strcmp(argv[i], "--at") && i + 1 < argc) g_at = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bd-rows") && i + 1 < argc) g_bd_rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stagger") && i + 1 < argc) g_stagger = atoi(argv[++i]);
#ifdef BENCH_CUPTI
        else if (!strcmp(argv[i], "--trace") && i + 1 < argc) { trace_step(argv[i + 1], dt); return 0; }
#endif
        else if (!strcmp(argv[i], "--spec") && i + 1 < argc) g_spec = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--spec-text") && i + 1 < argc) {
            int ks[8], nk = 0;
            for (int j = i + 2; j < argc && nk < 8; j++) ks[nk++] = atoi(argv[j]);
            spec_text(argv[i + 1], dt, reps, ks, nk);
            return 0;
        }
        else if (!strcmp(argv[i], "--pre") && i + 1 < argc) g_pre = argv[++i];
        else if (!strcmp(argv[i], "--steps")) { for (int j = i + 1; j < argc; j++) step_timing(argv[j]); return 0; }
        else if (!strcmp(argv[i], "--spec-steps")) { for (int j = i + 1; j < argc; j++) spec_steps(argv[j]); return 0; }
        else if (!strcmp(argv[i], "--gemm")) {
            if (dt == GPT2_DTYPE_BF16) g_gemm_dt = CUDA_R_16BF;
            gemm_table();
            return 0;
        }
        else if (!strcmp(argv[i], "--algo-classes")) { algo_classes(); return 0; }
        else if (!strcmp(argv[i], "--algo-search")) { algo_search(); return 0; }
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) g_prompt_rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompt-gemms")) {
            if (dt == GPT2_DTYPE_BF16) g_gemm_dt = CUDA_R_16BF;
            prompt_gemms();
            return 0;
        }
        else if (!strcmp(argv[i], "--class-pool")) { class_pool(); return 0; }
        else if (!strcmp(argv[i], "--skinny")) { skinny_table(); return 0; }
        else if (!strcmp(argv[i], "--skinny-det")) {
            for (int j = i + 1; j < argc; j++) skinny_det(argv[j], dt);
            return 0;
        }
        else if (!strcmp(argv[i], "--gelu-match")) { gelu_match(); return 0; }
        else if (!strcmp(argv[i], "--profile") && i + 1 < argc) g_profile = argv[++i];
        else if (!strcmp(argv[i], "--breakdown")) {
            /* F16 (--dtype bf16|f32 before it: that dtype; 124M, or the size after it): a decode step of the throughput batch (1024; 256 for 1558M) at
               position 160, one of 1 at position 192, a prefill step of 4 x 1024 */
            const char *size = i + 1 < argc ? argv[i + 1] : "124M";
            const int B = g_bd_rows > 0 ? g_bd_rows : !strcmp(size, "1558M") ? 256 : 1024;
            char label[64];
            gpt2_model *m = NULL;
            pre_action(dt); /* --pre before --breakdown */
            if (!only || strcmp(only, "prefill")) { /* --only prefill before --breakdown: the prefill step alone */
                snprintf(label, sizeof label, "%s decode %d x ctx %d", size, B, g_at);
                m = random_model(size, dt, B, 256, 0);
                CHECK(m);
                breakdown(label, m, B, -g_at, "decode");
                snprintf(label, sizeof label, "%s decode 1 x ctx 192", size);
                breakdown(label, m, 1, -192, "one");
                gpt2_free(m);
            }
            const int ns = g_prefill_seqs ? g_prefill_seqs : 4;
            snprintf(label, sizeof label, "%s prefill %d x 1024", size, ns);
            m = random_model(size, dt, ns > 16 ? ns : 16, 1024, ns > 4 ? ns * 1024 : 0);
            CHECK(m);
            breakdown(label, m, ns, 1024, "prefill");
            gpt2_free(m);
            return 0;
        }
        else if (ns < 8) sizes[ns++] = argv[i];
    }
    if (!ns) sizes[ns++] = "124M";
    if (reps < 1) reps = 1;
    cudaDeviceProp pr;
    CU(cudaGetDeviceProperties(&pr, 0));
    const double bw = measure_copy_bw(), flops = measure_gemm_rate();
    printf("device %s; copy %.2f TB/s, fp16 GEMM %.0f TFLOP/s (measured); dtype %s\n", pr.name, bw / 1e12, flops / 1e12,
           gpt2__dtype_name(dt));
    pre_action(dt);
    const double es = dt == GPT2_DTYPE_F32 ? 4 : 2;
    for (int si = 0; si < ns; si++) {
        const char *size = sizes[si];
        double t[16];
        if (!only || !strcmp(only, "latency")) {
            gpt2_model *m = random_model(size, dt, 1, 1024, 0);
            if (!m) goto throughput;
            const double P = params_of(m), C = m->cfg.n_embd, L = m->cfg.n_layer;
            run_generate(m, 1, 128, 8);
            const long long rows0 = m->spec_rows, kept0 = m->spec_kept;
            for (int r = 0; r < reps; r++) t[r] = (run_generate(m, 1, 128, 128) - run_generate(m, 1, 128, 1)) / 127.0;
            if (m->spec)
                printf("%-6s latency with speculation (--spec %d): %lld draft rows fed, %lld kept (random weights: see --spec-text)\n",
                       size, m->spec, m->spec_rows - rows0, m->spec_kept - kept0);
            double ms = median(t, reps) * 1e3;
            /* per token: every weight once (wpe aside) + K and V of the average context (192) */
            double bytes = (P - 1024 * C) * es + 2 * L * 192 * C * es;
            const gpt2__cuda_state *S = (const gpt2__cuda_state *)m->cuda;
            printf("%-6s latency     %8.3f ms/token   %.3g GB/token, roofline %.0f%% (%.3f ms)   peak %.1f GB   few-row kernel: %d of 5 products%s%s\n",
                   size, ms, bytes / 1e9, 100.0 * bytes / bw / (ms * 1e-3), bytes / bw * 1e3, peak_used() / 1e9, S->sk_n,
                   S->sk_miss[0] ? "; off it: " : "", S->sk_miss);
            gpt2_free(m);
        }
    throughput:
        if (!only || !strcmp(only, "throughput")) {
            const int B = g_bd_rows > 0 ? g_bd_rows : !strcmp(size, "1558M") ? 256 : 1024;
            gpt2_model *m = random_model(size, dt, B, 256, 0);
            if (!m) goto prefill;
            const double P = params_of(m), C = m->cfg.n_embd, L = m->cfg.n_layer;
            run_generate(m, B, 64, 4);
            for (int r = 0; r < reps; r++) t[r] = run_generate(m, B, 64, 192);
            double s = median(t, reps), tps = B * 192.0 / s;
            /* bytes: 191 decode steps, each all weights + every live K and V (average context 160) */
            double bytes = 191.0 * ((P - 1024 * C) * es + 2.0 * L * B * 160 * C * es);
            printf("%-6s throughput  %8.0f tokens/s (batch %d, %.2f s)   %.3g GB moved, roofline %.0f%% (%.0f tokens/s)   peak %.1f GB\n",
                   size, tps, B, s, bytes / 1e9, 100.0 * (bytes / bw) / s, B * 192.0 / (bytes / bw), peak_used() / 1e9);
            gpt2_free(m);
        }
    prefill:
        if (!only || !strcmp(only, "prefill")) {
            /* one forward over all NS x 1024 tokens (16, DESIGN.md's workload, unless --prefill-seqs), as the peers run
               it: a step budget of NS x 1024 prompt tokens */
            const int ns = g_prefill_seqs ? g_prefill_seqs : 16;
            gpt2_model *m = random_model(size, dt, ns > 16 ? ns : 16, 1024, ns * 1024);
            if (!m) continue;
            const double P = params_of(m), C = m->cfg.n_embd, L = m->cfg.n_layer, V = 50257;
            run_prefill(m, ns, 1024);
            for (int r = 0; r < reps; r++) t[r] = run_prefill(m, ns, 1024);
            double s = median(t, reps), tps = ns * 1024 / s;
            /* FLOPs that must be done: 2 x non-embedding weights (W a layer) + causal attention (2 x 2 x T/2 x C) per token
               and layer, but in the last layer only K and V (2 x 2 C^2) for every token, the rest of it for the NS rows
               whose logits are wanted (their attention over 1024 keys); + NS logits rows. (Until 2026-11-24 this counted
               the whole last layer for every token: 7.6% more at 124M, 1.8% at 1558M.) */
            const double W = (P - V * C - 1024 * C) / L;
            double fl = ns * 1024 * ((2.0 * W + 2.0 * 2 * 512 * C) * (L - 1) + 2.0 * 2 * C * C) +
                        ns * (2.0 * (W - 2 * C * C) + 2.0 * 2 * 1024 * C) + ns * 2.0 * V * C;
            printf("%-6s prefill     %8.0f tokens/s (%d x 1024, %.2f ms)   %.3g TFLOP, roofline %.0f%% (%.0f tokens/s)   peak %.1f GB\n",
                   size, tps, ns, s * 1e3, fl / 1e12, 100.0 * (fl / flops) / s, ns * 1024 / (fl / flops), peak_used() / 1e9);
            gpt2_free(m);
        }
    }
    if (g_pre_kept) gpt2_free(g_pre_kept);
    return 0;
}
