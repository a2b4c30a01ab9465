/* bench_gpt2 — the standard workloads on the CUDA backend, random weights made in process.

   Usage: bench/bench_gpt2 [124M|355M|774M|1558M ...] [--dtype f16|bf16|f32] [--only latency|throughput|prefill|score]
                           [--reps N] [--prefill-seqs N] [--spec K] [path switches, below]
     latency     batch 1: a 128-token prompt, then ms per generated token
     throughput  1024 sequences (256 at 1558M): a 64-token prompt, then 192 tokens each; tokens/s
     prefill     16 sequences of 1024 prompt tokens, each to its next token; tokens/s
     score       16 texts of 1024 tokens through gpt2_score (n_context 1: tokens 1..1023 of each scored, their
                 log-probabilities back on the host), the model loaded with step_tokens 16384 as ./demo --score loads
                 it (--score-tokens N: N; 0: the engine's default step); tokens scored/s
   (default: 124M, f16, every workload, 3 repeats). Each line: the figure (median of the repeats, after a warm-up),
   the bytes and FLOPs it had to move/do, and the fraction of the roofline from the copy bandwidth and the fp16 GEMM
   rate measured at the start of the same run (in every dtype: F32 and BF16 rows are held to the fp16 rate too).
   Also device memory per workload: in use after it (cudaMemGetInfo: the whole device, CUDA context included);
   for score, the highest in use while the warm-up call ran (sampled), and how much of it is above what the loaded
   model held before its first call.
   --sampling top_p|penalty: latency and throughput sample (temperature 1, top_p 0.9), with penalty every request also
   carrying repetition_penalty 1.2 (the processors' cost: not the standard workloads, which are greedy). The cost
   of the penalty is top_p+penalty against top_p; top_p itself is near its worst case here: random weights give
   nearly flat logits, so the nucleus holds most of the vocabulary (a trained model's holds far fewer ids).
   --prefill-seqs N (1..64): the prefill workload over N sequences of 1024 instead of 16 (then not the standard
   workload). The standard workloads run without speculation (--spec K: with at most K draft tokens a step; random
   weights make any continuation's repetitiveness an accident of the weights, so those figures do not measure it).

   bench/bench_gpt2 --breakdown [SIZE]: where one step's time goes, per phase: a decode step of the throughput batch
                            (--bd-rows R: of R rows) at position 160 (--at POS), a batch-1 decode step at position 192,
                            a prefill step of 4 x 1024 (--prefill-seqs N: of N; --only prefill: that step alone);
                            --only score: the scoring call, its logits product and reduction alone (score_breakdown)
   bench/bench_gpt2 --profile decode|one|prefill|score --breakdown [SIZE]: as --breakdown, and then one step of that kind once
                            more between cudaProfilerStart and cudaProfilerStop, for `ncu --profile-from-start off`
                            (bench/profile.sh)
   bench/trace --trace SIZE: one many-row decode step's kernels on a timeline (CUPTI, `make bench/trace`;
                            TRACE_ALL=1 lists them); --only score --trace SIZE: the scoring call's kernels by family
                            (TRACE_ALL=1: each kernel, and when the host launched it; TRACE_ALL=kernels: without the
                            launches, whose records slow the host)
   bench/bench_gpt2 [--reps N] --spec-text DIR [K...]: speculation on real text: the model in DIR (e.g. weights)
                            continues a passage greedily, 256 tokens, without drafts and with at most K draft tokens a
                            step (default 2 4 6 8): ms per token, drafts kept, and whether the tokens are the same

   Path switches, for A/B runs of the engine's paths (before the sizes or the mode): --no-lookahead --no-pdl --no-skinny
   --no-lnf --no-lnf-fit --no-gather --no-stage --no-att-mma --no-hold --parts N --part-rows R --att-sms N --split-ctx D
   --att-ns 2|3 --att-tma 0|1 --prefill-order 0|1 --score-rows R --no-fused-score --score-tokens N (each described where it
   is declared, below). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"

static const char *dtype_name(gpt2_dtype d) {
    return d == GPT2_DTYPE_F32 ? "F32" : d == GPT2_DTYPE_F16 ? "F16" : d == GPT2_DTYPE_BF16 ? "BF16" : "AUTO";
}
#include <cuda_profiler_api.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <atomic>
#include <thread>
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
static int g_lnf = 1;       /* --no-lnf: every layer norm a kernel of its own (no gpt2__ln_fold) */
static int g_gather = 1;    /* --no-gather: a prompt step's last layer on every fed row */
static int g_lnf_fit = 1;   /* --no-lnf-fit: the LN-folded products' full ring, not the FIT ring (gpt2__ln_fold_stages) */
static int g_stage = 1;     /* --no-stage: decode attention reads few rows' cached K/V from global memory (L2) */
static int g_att_mma = 1;   /* --no-att-mma: decode attention on the CUDA cores (gpt2__attn_kernel) */
static int g_hold = 1;      /* --no-hold: gpt2_generate feeds an idle engine's decode rows as their prompts end */
static int g_score_fused = 1; /* --no-fused-score: scoring's logits through cuBLAS and gpt2__score_kernel (not the fused
                                 gpt2__score_gemm_kernel) */
static int g_score_tokens = -1; /* --score-tokens N: the scoring workload's model loaded with step_tokens N (0: the
                                    engine's default step, 4096; default: all 16 x 1024 tokens in one step, as the prefill
                                    workload loads and as the peers run them, and as ./demo --score loads) */
static int score_step(int B, int T) { return g_score_tokens < 0 ? B * T : g_score_tokens; }
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
static int g_score_rows = 0; /* --score-rows R: the scoring workload's logits product in chunks of at most R rows (default:
                                 the logits buffer's, at least 2048; fewer keep a chunk in L2 for its reduction) */
static int g_at = 160;        /* --at POS: --breakdown's many-row decode step at this position */
static int g_sampling = 0;    /* --sampling top_p|penalty: the generate workloads sample (temperature 1, top_p 0.9),
                                 and with penalty every request also carries repetition_penalty 1.2 (default: greedy) */
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
    m->dtype = GPT2_DTYPE_F32; /* a float32 host copy (each matrix at least its [in][out] floats), uploaded in dt */
    CHECK(gpt2__weights_layout(m, (size_t)-1, "random weights", 1, &slots, &n_slots) == GPT2_OK);
    m->dtype = dt;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < m->w.bytes / 4; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ((float *)m->w.arena)[i] = ((float)(x >> 40) / 16777216.0f - 0.5f) * 0.04f;
    }
    for (int l = 0; l < L; l++)
        for (int i = 0; i < C; i++) { m->w.layers[l].ln1_w[i] = 1.0f; m->w.layers[l].ln2_w[i] = 1.0f; }
    for (int i = 0; i < C; i++) m->w.lnf_w[i] = 1.0f;
    for (int i = 0; i < n_slots; i++) { slots[i].src = (const unsigned char *)slots[i].dst; slots[i].dtype = 'F'; }
    gpt2_status st = gpt2__cuda_init(m, slots); /* uploads the host arena as a float32 checkpoint */
    free(slots);
    free(m->w.arena); /* the host copy is the checkpoint's part: a CUDA model keeps none) */
    m->w.arena = NULL;
    if (st != GPT2_OK) { /* e.g. F32 774M at batch 1024 needs more than 80 GB: said, and skipped */
        printf("%-6s skipped (batch %d, %d tokens): %s\n", size, max_batch, max_seq, gpt2_last_error());
        gpt2_free(m);
        return NULL;
    }
    ((gpt2__cuda_state *)m->cuda)->lookahead = g_lookahead;
    if (!g_pdl) ((gpt2__cuda_state *)m->cuda)->pdl = 0;
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (!g_skinny) S->few_row = 0;
    if (!g_lnf) S->ln_fold = 0;
    if (!g_lnf_fit) S->ln_fold_fit = 0;
    if (!g_gather) S->gather = 0;
    if (!g_stage) S->att_stage = 0;
    if (!g_att_mma) S->att_mma = 0;
    if (!g_score_fused) S->score_fused = 0;
    m->no_hold = !g_hold;
    m->spec = g_spec;
    if (g_parts >= 1) S->parts = g_parts;
    if (g_part_rows >= 0) S->part_rows = g_part_rows;
    if (g_prefill_order >= 0) S->prefill_order = g_prefill_order;
    if (g_att_sms >= 0 && g_att_sms != S->att_sms) { S->att_sms = g_att_sms; gpt2__green_make(S, g_att_sms); }
    if (g_split_ctx >= 0) S->green_ctx = g_split_ctx;
    if (g_att_ns) S->att_ns = g_att_ns;
    if (g_att_tma >= 0) S->att_tma = g_att_tma;
    static int told = 0;
    if (!told++) {
        printf("skinny decode products verified bit-identical to cuBLASLt (%s):", size);
        for (int i = 0; i < S->few_row_n; i++) printf(" %dx%d/%d", S->few_row_ok[i][0], S->few_row_ok[i][1], S->few_row_ok[i][2]);
        printf("%s; layer norms folded into products at <= %d rows: %s; decode steps in up to %d parts of >= %d rows, "
               "their attention on %d SMs of its own (0: on every SM); decode attention reads the caches with %s; prompt attention on %s\n",
               !S->few_row ? " (off: --no-skinny)" : S->few_row_n == 0 ? " none" : "", GPT2__LN_FOLD_ROWS,
               S->ln_fold ? "yes" : !g_lnf ? "no (--no-lnf)" : S->esize != 2 ? "no (F32)" : "no (this GPU)",
               S->parts, S->part_rows, S->green_sms, S->kv_tma && S->att_tma ? "TMA" : S->kv_tma ? "cp.async (--att-tma 0)" : "cp.async",
               S->flash_wg ? "wgmma" : S->flash ? (S->esize == 4 ? "CUDA cores, in tiles" : "mma.sync") : "CUDA cores, row by row");
        if (!S->green_sms) printf("no SMs of its own for decode attention: %s\n", S->green_why ? S->green_why : "?");
    }
    return m;
}

static double params_of(const gpt2_model *m) { /* the parameters: the arena's floats less its panels' padding */
    const double L = m->cfg.n_layer, C = m->cfg.n_embd, V = m->cfg.n_vocab, P = m->cfg.n_ctx;
    return L * (12 * C * C + 13 * C) + V * C + P * C + 2 * C;
}

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
        if (g_sampling) { r[i].sampling.temperature = 1.0f; r[i].sampling.top_p = 0.9f; r[i].sampling.seed = 1000u + (unsigned)i; }
        if (g_sampling == 2) r[i].sampling.repetition_penalty = 1.2f;
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

/* B texts of T tokens through the public gpt2_score, every token after the first scored (n_context 1, each text one
   window when T <= max_seq), the log-probabilities back in lp ([B][T - 1]); seconds for the call. */
static double run_score(gpt2_model *m, int B, int T, float *lp, double *sum) {
    static std::vector<int> tok;
    tok.resize((size_t)B * T);
    for (size_t i = 0; i < tok.size(); i++) tok[i] = (int)((i * 7919u + 13u) % 50257u);
    std::vector<gpt2_score_request> r((size_t)B);
    memset(r.data(), 0, r.size() * sizeof r[0]);
    for (int i = 0; i < B; i++) {
        r[i].tokens = tok.data() + (size_t)i * T; r[i].n_tokens = T; r[i].n_context = 1;
        r[i].logprobs = lp + (size_t)i * (T - 1);
    }
    CU(cudaDeviceSynchronize());
    const double t0 = now_s();
    CHECK(gpt2_score(m, r.data(), B) == GPT2_OK);
    const double t = now_s() - t0;
    *sum = 0.0;
    for (int i = 0; i < B; i++) { CHECK(r[i].n_scored == T - 1); *sum += r[i].sum_logprob; }
    return t;
}

/* The most device memory in use (cudaMemGetInfo, sampled every 100 us by a thread of its own) while fn runs, and
   once after it. Only around an untimed call: the samples' driver calls could disturb a timed one. */
template <typename F> static size_t peak_during(F fn) {
    std::atomic<int> done(0);
    std::atomic<size_t> peak(peak_used());
    std::thread poll([&]() {
        while (!done.load()) {
            const size_t u = peak_used();
            if (u > peak.load()) peak.store(u);
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    });
    fn();
    done.store(1);
    poll.join();
    const size_t u = peak_used();
    return u > peak.load() ? u : peak.load();
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
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    gpt2__lane L = gpt2__lane_of(S);
    const gpt2__paths p = gpt2__paths_of(S, m, &g_d, g_N, g_P, g_n, 0, &L);
    for (int l = 0; l < m->cfg.n_layer; l++) CHECK(gpt2__attention<T>(S, &L, &p, m, l, &g_d, g_N) == GPT2_OK);
}
template <typename T> static void ph_gemms_t(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const int C = m->cfg.n_embd, F = m->n_inner, N = g_N;
    const gpt2__lane L = gpt2__lane_of(S);
    const gpt2__paths p = gpt2__paths_of(S, m, &g_d, g_N, g_P, g_n, 0, &L);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const gpt2__cuda_layer *y = &S->layers[l];
        CHECK(gpt2__linear<T>(S, &L, p.few_row[0], S->qkv, y->qkv_w, S->ln, y->qkv_b, 3 * C, N, g_P, C, GPT2__EPI_BIAS, 0, 0, NULL) == GPT2_OK);
        CHECK(gpt2__linear<T>(S, &L, p.few_row[1], S->proj, y->proj_w, S->att, y->proj_b, C, N, g_P, C, GPT2__EPI_BIAS, 0, 0, S->part) == GPT2_OK);
        CHECK(gpt2__linear<T>(S, &L, p.few_row[2], S->fc, y->fc_w, S->ln, y->fc_b, F, N, g_P, C, GPT2__EPI_BIAS_ACT, 0, 0, NULL) == GPT2_OK);
        CHECK(gpt2__linear<T>(S, &L, p.few_row[3], S->att, y->fcp_w, S->fc, y->fcp_b, C, N, g_P, F, GPT2__EPI_BIAS, 0, 0, S->part) == GPT2_OK);
    }
}
template <typename T> static void ph_logits_t(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const gpt2__lane L = gpt2__lane_of(S);
    const gpt2__paths p = gpt2__paths_of(S, m, &g_d, g_N, g_P, g_n, 0, &L);
    CHECK(gpt2__linear<T>(S, &L, p.few_row[4], S->logits, S->lm_head, S->ln, NULL, S->ldv, g_n, 0, m->cfg.n_embd, GPT2__EPI_NONE, 1, S->ldv, NULL) ==
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
                                        (size_t)(g_N - g_P) * C, gpt2__decode_pieces(K), g_P, NULL,
                                        l & 1 ? (const T *)S->att : NULL, l & 1 ? 0 : 1, NULL, NULL, 0};
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
                                                                      gpt2__advance{NULL, NULL, NULL, 0}, 0);
}
static void ph_step(gpt2_model *m, int) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (g_P == 0 && S->use_graphs) CHECK(gpt2__cuda_decode_graph(m, &g_d, g_n, S->parts_last) == GPT2_OK);
    else CHECK(gpt2__cuda_step_body(m, &g_d, g_N, g_P, g_n, S->parts_last) == GPT2_OK);
}

/* with --profile KIND: fn once more between cudaProfilerStart and cudaProfilerStop (ncu --profile-from-start off) */
static void profile_once(gpt2_model *m, const char *kind, void (*fn)(gpt2_model *, int), const char *label) {
    if (!g_profile || strcmp(g_profile, kind)) return;
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    CU(cudaStreamSynchronize(S->stream));
    CU(cudaProfilerStart());
    fn(m, 0);
    CU(cudaStreamSynchronize(S->stream));
    CU(cudaProfilerStop());
    printf("profiled %s\n", label);
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
    /* the compacted last layer as gpt2__cuda_step set it up (the host values are not in the blob) */
    g_d.gat_P = n - (g_N - g_P);
    g_d.n_gat = S->gather > 0 && g_P - g_d.gat_P >= S->gather ? n : 0;
    phase_t ph[] = {{"step", time_ms(S->stream, ph_step, m, 0)}, {"attention", time_ms(S->stream, ph_attention, m, 0)},
                    {"gemms", time_ms(S->stream, ph_gemms, m, 0)}, {"logits", time_ms(S->stream, ph_logits, m, 0)},
                    {"norms", time_ms(S->stream, ph_norms, m, 0)}, {"kv_store", time_ms(S->stream, ph_kv_store, m, 0)},
                    {"sampler", time_ms(S->stream, ph_sampler, m, 0)}};
    printf("breakdown %-28s", label);
    for (size_t i = 0; i < sizeof ph / sizeof ph[0]; i++) printf("  %s %.3f", ph[i].name, ph[i].ms);
    printf("  (ms)\n");
    if (S->green_step) { /* the step split: its phases on their own SMs (gpt2__green_make) */
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
    profile_once(m, kind, ph_step, label); /* the whole step once more, alone, for the profiler */
    free(tok); free(next); free(seqs);
}

/* The scoring workload's call (16 texts of 1024 tokens, one step) and the two phases after its forward, alone over the
   same 16 x 1023 scored rows: the logits product in chunks of S->logit_rows rows (gpt2__linear into S->logits) and the
   reduction of each chunk (gpt2__score_kernel), then both as the call runs them (gpt2__cuda_score_rows). What the call
   spends beyond the last is the forward (and the host's part). With --profile score: gpt2__cuda_score_rows once more
   under the profiler. The rows' final layer norm is whatever S->ln holds: the time does not depend on it. */
static int g_sb_rows;
template <typename T> static void ph_score_product_t(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const gpt2__lane L = gpt2__lane_of(S);
    const int C = m->cfg.n_embd;
    for (int c0 = 0; c0 < g_sb_rows; c0 += S->logit_rows) {
        const int nr = g_sb_rows - c0 < S->logit_rows ? g_sb_rows - c0 : S->logit_rows;
        CHECK(gpt2__linear<T>(S, &L, 0, S->logits, S->lm_head, (const T *)S->ln + (size_t)c0 * C, NULL, S->ldv, nr, nr, C,
                              GPT2__EPI_NONE, 1, S->ldv, NULL) == GPT2_OK);
    }
}
static int *g_sb_targets, *g_sb_rank;
static double *g_sb_lp;
static void ph_score_reduce(gpt2_model *m, int) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    for (int c0 = 0; c0 < g_sb_rows; c0 += S->logit_rows) {
        const int nr = g_sb_rows - c0 < S->logit_rows ? g_sb_rows - c0 : S->logit_rows;
        gpt2__score_kernel<<<nr, 256, 0, S->stream>>>(S->logits, m->cfg.n_vocab, S->ldv, g_sb_targets + c0, g_sb_lp + c0, g_sb_rank + c0);
    }
}
template <typename T> static void ph_score_rows_t(gpt2_model *m) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    const gpt2__lane L = gpt2__lane_of(S);
    CHECK(gpt2__cuda_score_rows<T>(m, S, &L, g_sb_rows, g_sb_targets, g_sb_lp, g_sb_rank) == GPT2_OK);
}
static void ph_score_product(gpt2_model *m, int) { BY_DTYPE(m, ph_score_product_t); }
static void ph_score_rows(gpt2_model *m, int) { BY_DTYPE(m, ph_score_rows_t); }
static void score_breakdown(const char *size, gpt2_dtype dt) {
    const int B = 16, T = 1024;
    gpt2_model *m = random_model(size, dt, B, T, score_step(B, T));
    CHECK(m);
    gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
    if (g_score_rows > 0 && g_score_rows < S->logit_rows) S->logit_rows = g_score_rows;
    std::vector<float> lp((size_t)B * (T - 1));
    double sum, t[5];
    run_score(m, B, T, lp.data(), &sum);
    for (int r = 0; r < 5; r++) t[r] = run_score(m, B, T, lp.data(), &sum);
    g_sb_rows = B * (T - 1);
    std::vector<int> tg((size_t)g_sb_rows);
    for (int i = 0; i < g_sb_rows; i++) tg[i] = (int)((i * 7919u + 13u) % (unsigned)m->cfg.n_vocab);
    CU(cudaMalloc(&g_sb_targets, tg.size() * sizeof(int)));
    CU(cudaMalloc(&g_sb_rank, tg.size() * sizeof(int)));
    CU(cudaMalloc(&g_sb_lp, tg.size() * sizeof(double)));
    CU(cudaMemcpy(g_sb_targets, tg.data(), tg.size() * sizeof(int), cudaMemcpyHostToDevice));
    const double call = median(t, 5) * 1e3, prod = time_ms(S->stream, ph_score_product, m, 0),
                 red = time_ms(S->stream, ph_score_reduce, m, 0), both = time_ms(S->stream, ph_score_rows, m, 0);
    char label[64];
    snprintf(label, sizeof label, "%s score 16 x 1024", size);
    printf("breakdown %-28s  call %.3f  logits product %.3f  reduction %.3f  both as the call runs them %.3f  the rest "
           "(forward, host) %.3f  (ms; chunks of %d rows)\n", label, call, prod, red, both, call - both, S->logit_rows);
    profile_once(m, "score", ph_score_rows, label);
    cudaFree(g_sb_targets); cudaFree(g_sb_rank); cudaFree(g_sb_lp);
    gpt2_free(m);
}

/* ---- one decode step's kernels on a timeline (--trace SIZE; a build with -DBENCH_CUPTI ... -lcupti: make bench/trace)

   CUPTI's concurrent-kernel records of one many-row decode step (the throughput batch at position --at, as
   --breakdown's, replayed from its graph, nothing else on the GPU): each kernel's start and end. In a step of parts
   with the SMs split (gpt2__cuda_parts), decode attention's kernels run on the attention set and every other kernel
   on the rest until the last part's tail, so the two sets' busy time, their overlap and the time neither is busy say
   where such a step waits. */
#ifdef BENCH_CUPTI
#include <cupti.h>
#include <algorithm>
#include <string>
struct trace_k { uint64_t t0, t1; int attn; const char *name; uint32_t corr; };
static std::vector<trace_k> g_tr;
static std::vector<std::pair<uint32_t, uint64_t>> g_api; /* (correlation id, the launching API call's start) */
struct trace_api { uint64_t t0, t1; const char *name; };
static std::vector<trace_api> g_calls; /* every API call (TRACE_ALL=api) */
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
            g_tr.push_back({k->start, k->end, strstr(k->name, "attn_stream") != NULL, strdup(k->name), k->correlationId});
        } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
            const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
            g_api.push_back({a->correlationId, a->start});
            const char *nm = NULL;
            cuptiGetCallbackName(r->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &nm);
            g_calls.push_back({a->start, a->end, nm ? nm : "?"});
        }
    free(buf);
}
/* CUPTI's kernel records on, into g_tr */
static void tr_enable(void) {
    if (cuptiActivityRegisterCallbacks(tr_request, tr_complete) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) { fprintf(stderr, "CUPTI unavailable\n"); exit(1); }
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
    tr_enable();
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

/* --only score --trace SIZE: the scoring workload's call (16 texts of 1024 tokens, --score-tokens N for the step) on
   a timeline: the call's span from its first kernel's start to its last one's end, the time no kernel ran in it
   (the host's turns between steps), and each kernel family's count and summed time, the largest first. */
static void trace_score(const char *size, gpt2_dtype dt) {
    tr_enable();
    if (getenv("TRACE_ALL") && strcmp(getenv("TRACE_ALL"), "kernels") && (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS ||
                                cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER) != CUPTI_SUCCESS)) { fprintf(stderr, "CUPTI: no API records\n"); exit(1); }
    const int B = 16, T = 1024;
    gpt2_model *m = random_model(size, dt, B, T, score_step(B, T));
    CHECK(m);
    std::vector<float> lp((size_t)B * (T - 1));
    double sum;
    for (int r = 0; r < 3; r++) run_score(m, B, T, lp.data(), &sum);
    CU(cudaDeviceSynchronize());
    cuptiActivityFlushAll(1);
    for (int rep = 0; rep < 3; rep++) {
        g_tr.clear();
        g_api.clear();
        g_calls.clear();
        const double call = run_score(m, B, T, lp.data(), &sum);
        CU(cudaDeviceSynchronize());
        cuptiActivityFlushAll(1);
        if (g_tr.empty()) { printf("trace: no kernel records\n"); break; }
        std::sort(g_tr.begin(), g_tr.end(), [](const trace_k &a, const trace_k &b) { return a.t0 < b.t0; });
        uint64_t t1 = g_tr.front().t1;
        std::vector<std::pair<uint64_t, uint64_t>> all;
        std::vector<std::pair<std::string, std::pair<int, double>>> fam;
        for (const trace_k &k : g_tr) {
            t1 = std::max(t1, k.t1);
            all.push_back({k.t0, k.t1});
            std::string name(k.name);
            name = name.substr(0, name.find_first_of("<("));
            size_t f = 0;
            while (f < fam.size() && fam[f].first != name) f++;
            if (f == fam.size()) fam.push_back({name, {0, 0.0}});
            fam[f].second.first++;
            fam[f].second.second += (double)(k.t1 - k.t0);
        }
        const double span = (double)(t1 - g_tr.front().t0), busy = tr_union(all);
        printf("trace %s score %d x %d (%s, step %d tokens): call %.3f ms, kernels from first to last %.3f ms, %zu kernels, "
               "none running %.3f ms\n", size, B, T, dtype_name(dt), m->prefill_tokens, call * 1e3, span / 1e6, g_tr.size(),
               (span - busy) / 1e6);
        if (rep < 2) continue;
        if (getenv("TRACE_ALL")) /* each kernel: start and end from the first one's start, the time none ran before it,
                                    and when the host called its launch (from the same origin; -1: not recorded) */
            for (size_t i = 0; i < g_tr.size(); i++) {
                uint64_t before = g_tr[0].t0;
                for (size_t j = 0; j < i; j++) before = std::max(before, g_tr[j].t1);
                double launched = -1;
                for (const auto &a : g_api)
                    if (a.first == g_tr[i].corr) launched = ((double)a.second - (double)g_tr[0].t0) / 1e3;
                printf("  %9.1f %9.1f  idle before %6.1f  launched %9.1f  %.60s\n", (g_tr[i].t0 - g_tr[0].t0) / 1e3,
                       (g_tr[i].t1 - g_tr[0].t0) / 1e3, g_tr[i].t0 > before ? (g_tr[i].t0 - before) / 1e3 : 0.0, launched, g_tr[i].name);
            }
        if (getenv("TRACE_ALL") && !strcmp(getenv("TRACE_ALL"), "api")) { /* the host's API calls of 5 us or more */
            std::sort(g_calls.begin(), g_calls.end(), [](const trace_api &a, const trace_api &b) { return a.t0 < b.t0; });
            for (const trace_api &a : g_calls)
                if (a.t1 - a.t0 >= 5000)
                    printf("  api %9.1f %9.1f  %8.1f us  %s\n", ((double)a.t0 - (double)g_tr[0].t0) / 1e3, ((double)a.t1 - (double)g_tr[0].t0) / 1e3,
                           (a.t1 - a.t0) / 1e3, a.name);
        }
        std::sort(fam.begin(), fam.end(), [](const auto &a, const auto &b) { return a.second.second > b.second.second; });
        for (const auto &f : fam) printf("  %8.3f ms %5d  %.70s\n", f.second.second / 1e6, f.second.first, f.first.c_str());
    }
    gpt2_free(m);
}
#endif

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
           dtype_name(m->dtype), P, G);
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

int main(int argc, char **argv) {
    const char *sizes[8];
    int ns = 0, reps = 3;
    gpt2_dtype dt = GPT2_DTYPE_F16;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "f16") && strcmp(argv[i], "bf16") && strcmp(argv[i], "f32")) {
                fprintf(stderr, "bench_gpt2: --dtype takes f16, bf16 or f32, not '%s'\n", argv[i]);
                return 2;
            }
            dt = !strcmp(argv[i], "bf16") ? GPT2_DTYPE_BF16 : !strcmp(argv[i], "f32") ? GPT2_DTYPE_F32 : GPT2_DTYPE_F16;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-lookahead")) g_lookahead = 0;
        else if (!strcmp(argv[i], "--no-pdl")) g_pdl = 0;
        else if (!strcmp(argv[i], "--no-skinny")) g_skinny = 0;
        else if (!strcmp(argv[i], "--no-lnf")) g_lnf = 0;
        else if (!strcmp(argv[i], "--no-lnf-fit")) g_lnf_fit = 0;
        else if (!strcmp(argv[i], "--no-gather")) g_gather = 0;
        else if (!strcmp(argv[i], "--no-stage")) g_stage = 0;
        else if (!strcmp(argv[i], "--no-att-mma")) g_att_mma = 0;
        else if (!strcmp(argv[i], "--no-hold")) g_hold = 0;
        else if (!strcmp(argv[i], "--no-fused-score")) g_score_fused = 0;
        else if (!strcmp(argv[i], "--score-tokens") && i + 1 < argc) g_score_tokens = atoi(argv[++i]);
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
        else if (!strcmp(argv[i], "--score-rows") && i + 1 < argc) g_score_rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bd-rows") && i + 1 < argc) g_bd_rows = atoi(argv[++i]);
#ifdef BENCH_CUPTI
        else if (!strcmp(argv[i], "--trace") && i + 1 < argc) {
            if (only && !strcmp(only, "score")) trace_score(argv[i + 1], dt);
            else trace_step(argv[i + 1], dt);
            return 0;
        }
#endif
        else if (!strcmp(argv[i], "--spec") && i + 1 < argc) g_spec = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sampling") && i + 1 < argc) {
            ++i;
            g_sampling = !strcmp(argv[i], "top_p") ? 1 : !strcmp(argv[i], "penalty") ? 2 : -1;
            if (g_sampling < 0) { fprintf(stderr, "bench_gpt2: --sampling takes top_p or penalty, not '%s'\n", argv[i]); return 2; }
        }
        else if (!strcmp(argv[i], "--spec-text") && i + 1 < argc) {
            int ks[8], nk = 0;
            for (int j = i + 2; j < argc && nk < 8; j++) ks[nk++] = atoi(argv[j]);
            spec_text(argv[i + 1], dt, reps, ks, nk);
            return 0;
        }
        else if (!strcmp(argv[i], "--profile") && i + 1 < argc) g_profile = argv[++i];
        else if (!strcmp(argv[i], "--breakdown")) {
            /* F16 (--dtype bf16|f32 before it: that dtype; 124M, or the size after it): a decode step of the throughput batch (1024; 256 for 1558M) at
               position 160, one of 1 at position 192, a prefill step of 4 x 1024 */
            const char *size = i + 1 < argc ? argv[i + 1] : "124M";
            if (only && !strcmp(only, "score")) { score_breakdown(size, dt); return 0; } /* --only score: the scoring call */
            const int B = g_bd_rows > 0 ? g_bd_rows : !strcmp(size, "1558M") ? 256 : 1024;
            char label[64];
            gpt2_model *m = NULL;
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
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench/bench_gpt2 [124M|355M|774M|1558M ...] [--dtype f16|bf16|f32] "
                   "[--only latency|throughput|prefill|score] [--reps N] [--prefill-seqs N] [--spec K] [--sampling top_p|penalty]\n"
                   "       bench/bench_gpt2 [--only prefill] --breakdown [SIZE]; --spec-text DIR [K...]; --profile KIND\n"
                   "(the comment at the top of bench/bench_gpt2.cu says what each workload and switch does)\n");
            return 0;
        }
        else if (!strcmp(argv[i], "124M") || !strcmp(argv[i], "355M") || !strcmp(argv[i], "774M") || !strcmp(argv[i], "1558M")) {
            if (ns < 8) sizes[ns++] = argv[i];
        }
        else { fprintf(stderr, "bench_gpt2: unknown argument '%s' (--help lists them)\n", argv[i]); return 2; }
    }
    if (only && strcmp(only, "latency") && strcmp(only, "throughput") && strcmp(only, "prefill") && strcmp(only, "score")) {
        fprintf(stderr, "bench_gpt2: --only takes latency, throughput, prefill or score, not '%s'\n", only);
        return 2;
    }
    if (!ns) sizes[ns++] = "124M";
    if (reps < 1) reps = 1;
    if (reps > 16) reps = 16;
    cudaDeviceProp pr;
    CU(cudaGetDeviceProperties(&pr, 0));
    const double bw = measure_copy_bw(), flops = measure_gemm_rate();
    printf("device %s; copy %.2f TB/s, fp16 GEMM %.0f TFLOP/s (measured); dtype %s\n", pr.name, bw / 1e12, flops / 1e12,
           dtype_name(dt));
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
                   size, ms, bytes / 1e9, 100.0 * bytes / bw / (ms * 1e-3), bytes / bw * 1e3, peak_used() / 1e9, S->few_row_n,
                   S->few_row_miss[0] ? "; off it: " : "", S->few_row_miss);
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
            printf("%-6s throughput  %8.0f tokens/s (batch %d, %.2f s)   %.3g GB moved, roofline %.0f%% (%.0f tokens/s)   peak %.1f GB%s\n",
                   size, tps, B, s, bytes / 1e9, 100.0 * (bytes / bw) / s, B * 192.0 / (bytes / bw), peak_used() / 1e9,
                   g_sampling == 1 ? "   sampled: top_p 0.9" : g_sampling == 2 ? "   sampled: top_p 0.9, repetition_penalty 1.2" : "");
            gpt2_free(m);
        }
    prefill:
        if (!only || !strcmp(only, "prefill")) {
            /* one forward over all NS x 1024 tokens (16, the standard workload, unless --prefill-seqs), as the peers run
               it: a step budget of NS x 1024 prompt tokens */
            const int ns = g_prefill_seqs ? g_prefill_seqs : 16;
            gpt2_model *m = random_model(size, dt, ns > 16 ? ns : 16, 1024, ns * 1024);
            if (!m) goto score;
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
    score:
        if (!only || !strcmp(only, "score")) {
            /* 16 texts of 1024 tokens, loaded as ./demo --score loads for them (gpt2_load with max_batch 16, max_seq
               1024, step_tokens 16384: all of them in one step; --score-tokens 0: the engine's default step) */
            const int B = 16, T = 1024;
            gpt2_model *m = random_model(size, dt, B, T, score_step(B, T));
            if (!m) continue;
            gpt2__cuda_state *S = (gpt2__cuda_state *)m->cuda;
            if (g_score_rows > 0 && g_score_rows < S->logit_rows) S->logit_rows = g_score_rows;
            const double P = params_of(m), C = m->cfg.n_embd, L = m->cfg.n_layer, V = m->cfg.n_vocab;
            std::vector<float> lp((size_t)B * (T - 1));
            double sum = 0.0;
            const size_t before = peak_used();
            const size_t peak = peak_during([&]() { run_score(m, B, T, lp.data(), &sum); });
            for (int r = 0; r < reps; r++) t[r] = run_score(m, B, T, lp.data(), &sum);
            const double s = median(t, reps), n = (double)B * (T - 1), tps = n / s;
            /* FLOPs that must be done: each text feeds its T - 1 tokens before the last; every fed row goes through every
               layer (2 x the non-embedding weights W of a layer, and causal attention: 2 x 2 x C per key, row p attending
               to p + 1 keys) and through the logits product (2 x C x V) */
            const double W = (P - V * C - 1024 * C) / L;
            const double fl = B * ((T - 1) * (2.0 * W * L + 2.0 * C * V) + 2.0 * 2 * C * L * (T - 1.0) * T / 2);
            printf("%-6s score       %8.0f tokens/s (%d x %d, %.0f scored, %.2f ms)   %.3g TFLOP, roofline %.0f%% (%.0f tokens/s)   "
                   "peak %.1f GB (+%.0f MB over the loaded model)   mean logprob %.4f\n",
                   size, tps, B, T, n, s * 1e3, fl / 1e12, 100.0 * (fl / flops) / s, n / (fl / flops), peak / 1e9,
                   peak > before ? (peak - before) / 1e6 : 0.0, sum / n);
            gpt2_free(m);
        }
    }
    return 0;
}
