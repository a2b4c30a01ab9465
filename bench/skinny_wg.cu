/* bench/skinny_wg — a wgmma form of gpt2__skinny_kernel, against it, as a batch-1 step runs them (RESULTS.md item
   112; the prototype that item's bench/mma_chain decides on).
   The form: a block is one warpgroup owning 64 output columns (W rows o0..o0+63) of one piece of K. W streams
   through a ring of ST stages of KC of K (cp.async, L2 evict-first, the first ST-1 before the PDL wait, as
   gpt2__skinny_kernel), each stage in the 128-byte swizzle wgmma reads (rows of 64 of K, 128 bytes, 8-row atoms of
   1024 bytes); X's n <= 8 rows go into shared memory the same way after the wait (rows n..7 zeros). Each 16 of K is
   one wgmma m64n8k16 with W as A and X as B, all into one fp32 accumulator that starts at 0: the chain
   gpt2__skinny_kernel and cuBLASLt's pinned algorithm compute, so the bits should be theirs. A chunk's wgmmas are
   one group; the stage the group before read is refilled once that group is done (wgmma.wait_group 1), so two
   groups are in flight and the chain does not drain at each chunk. Epilogue as gpt2__skinny_kernel (out_f32: the
   piece's fp32 sums; else sum + bias in fp32, rounded once).
   The harness: per shape of a 124M and a 1558M batch-1 step (the pieces of K as gpt2.cuh splits the projections),
   L products each with weights of its own (so they stream from DRAM), chained with programmatic dependent launch
   in one CUDA graph, replayed 10 times: µs a product (median), for gpt2__skinny_kernel (1 or 2 warps a block, as
   gpt2__skinny_go picks) and for this form; and the outputs of one product of each, compared bit for bit, at 1 and
   2 rows, F16 and BF16. Build: make bench/skinny_wg (needs the sm_90a code the Makefile builds).
   `bench/skinny_wg lnf [from]` runs only the second part (RESULTS.md item 113): the LN-folded products (qkv and the
   MLP's first product of a step of <= 2 rows), gpt2__skinny_kernel's LNE form against lnf_wg with 4 and 8 warps,
   shapes from index `from` (0: 124M's, 2: 1558M's alone). On the H100 (2026-11-23) every shape gives the same bits;
   lnf_wg ran 124M's 3-9% slower with an L2 policy on its weight copies, and with one stopped at 1558M's (C 1600) on
   an illegal instruction in warp 3 of every block, at wg_issue's cp.async during the chain's refills (which 124M's K
   never needs; skinny_wg runs the same refills with the policy without fault). Without the policy (as now) it runs
   there: 1558M's shapes 6-30% slower than the LNE form, 124M's -3% to +10% (RESULTS.md item 113). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh" /* gpt2__skinny_run, gpt2__launch, gpt2__cp16_pol, gpt2__pdl_enter, gpt2__wg_desc, gpt2__lnf_params, ... */

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>
#include <vector>
#define CU(x) do { cudaError_t e_ = (x); if (e_) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

#ifndef WG_KC
#define WG_KC 128 /* K per stage: two 64-wide swizzle atoms' columns */
#endif
#ifndef WG_ST
#define WG_ST 10  /* stages */
#endif
static const int WG_COLS = 64, WG_XROWS = 8;

static size_t wg_smem(int Ik) { /* the ring, X's 8 rows (Ik rounded up to 64), and 1 KB to align both to 1024 */
    return (size_t)WG_ST * WG_COLS * WG_KC * 2 + (size_t)WG_XROWS * ((Ik + 63) / 64) * 128 + 1024;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* one k16 step: d (m64n8, fp32) += A (64 x 16, descriptor) x B (16 x 8, descriptor) */
static __device__ __forceinline__ void wg_step(float (&d)[4], uint64_t a, uint64_t b, __half) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(a), "l"(b) : "memory");
}
static __device__ __forceinline__ void wg_step(float (&d)[4], uint64_t a, uint64_t b, __nv_bfloat16) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(a), "l"(b) : "memory");
}
/* N k16 steps of a stage s (W, 64 rows) and of X's columns xc: step k in 64-wide column block k / 4, 32 bytes on per
   step within it */
template <int N, typename T>
static __device__ __forceinline__ void wg_steps(float (&d)[4], const unsigned char *s, const unsigned char *xc, T) {
#pragma unroll
    for (int k = 0; k < N; k++)
        wg_step(d, gpt2__wg_desc(s + (k >> 2) * (WG_COLS * 128) + (k & 3) * 32), gpt2__wg_desc(xc + (k >> 2) * 1024 + (k & 3) * 32), T());
}
static __device__ __forceinline__ void wg_keep(float (&d)[4]) {
#pragma unroll
    for (int i = 0; i < 4; i++) asm volatile("" : "+f"(d[i])::"memory");
}
/* put(col, r, h, v) for each output this thread holds inside O columns and n rows: d[2 h + j] is column oc + 8 h
   (oc = o0 + 16 warp + lane / 4), row 2 t + j (t = lane % 4) */
template <typename F>
static __device__ __forceinline__ void wg_each(const float (&d)[4], int oc, int t, int O, int n, F put) {
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            if (oc + 8 * h < O && 2 * t + j < n) put(oc + 8 * h, 2 * t + j, h, d[2 * h + j]);
}
/* Stage c of W (rows o0..o0+63 of O, row stride ld, Ik of K from Wp) into its ring slot, by the warpgroup's 128
   threads (tid), then a commit (also when c is past the last of nch). Thread tid's copies: row r = 4 j + lane / 8
   (j = warp + 4 e), 16-byte chunk q = lane % 8 of 64-wide column block b; a warp copies 4 rows x 128 contiguous
   bytes a time and writes 512 contiguous shared bytes. */
template <typename T, bool POL = true>
static __device__ __forceinline__ void wg_issue(unsigned char *ring, int c, int nch, int tid, const T *Wp, int o0, int O,
                                                size_t ld, int Ik, uint64_t pol) {
    constexpr int PER = WG_COLS * WG_KC / 8 / 128; /* 8 at KC 128 */
    if (c < nch) {
        unsigned char *s = ring + (c % WG_ST) * (WG_COLS * WG_KC * 2);
#pragma unroll
        for (int e = 0; e < PER; e++) {
            const int i = tid + 128 * e, q = i & 7, rb = i >> 3, r = rb % WG_COLS, b = rb / WG_COLS;
            const int k = c * WG_KC + b * 64 + q * 8;
            const bool ok = o0 + r < O && k < Ik;
            unsigned char *dst = s + b * (WG_COLS * 128) + r * 128 + ((q ^ (r & 7)) << 4);
            if (POL) gpt2__cp16_pol(dst, ok ? Wp + (size_t)(o0 + r) * ld + k : Wp, ok, pol);
            else gpt2__cp16(dst, ok ? Wp + (size_t)(o0 + r) * ld + k : Wp, ok);
        }
    }
    gpt2__cp_commit();
}
/* The chain over nch stages (the first WG_ST - 1 issued): each chunk's k16 steps one group, the stage the group
   before read refilled once that group is done (two groups in flight). Named: the warpgroup syncs on barrier 1
   (other warps of the block have left), else on __syncthreads. d: the m64n8 fp32 accumulator, from 0. */
template <typename T, bool NAMED, bool POL = true>
static __device__ __forceinline__ void wg_chain(float (&d)[4], unsigned char *ring, const unsigned char *xs, int nch, int tid,
                                                const T *Wp, int o0, int O, size_t ld, int Ik, uint64_t pol) {
    constexpr int KC = WG_KC, ST = WG_ST, SB = WG_COLS * KC * 2;
    wg_keep(d); /* the accumulator's registers are set before the first wgmma.fence (and d is not touched again until
                   wait_group 0: a group in flight writes them) */
    const int full = Ik / KC, tail = (Ik % KC) / 16;
    for (int c = 0; c < nch; c++) {
        gpt2__cp_wait<ST - 2>();
        gpt2__fence_async_smem(); /* this thread's copies (and X's stores), before wgmma reads them */
        if (NAMED) asm volatile("bar.sync 1, 128;\n" ::: "memory");
        else __syncthreads();
        const unsigned char *s = ring + (c % ST) * SB, *xc = xs + (c * KC / 64) * 1024;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        /* the chunk's k16 steps: all of them, or the last chunk's tail (a straight run of each length) */
        switch (c < full ? KC / 16 : tail) {
#define WG_CASE(N) case N: wg_steps<N>(d, s, xc, T()); break;
            WG_CASE(1) WG_CASE(2) WG_CASE(3) WG_CASE(4) WG_CASE(5) WG_CASE(6) WG_CASE(7) WG_CASE(8)
#undef WG_CASE
            default: break;
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); /* the group before is done: its stage is free */
        wg_issue<T, POL>(ring, c + ST - 1, nch, tid, Wp, o0, O, ld, Ik, pol);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    wg_keep(d);
    gpt2__cp_wait<0>();
}
#endif

/* D = X [n][ld I] @ W^T over piece blockIdx.y of K (Ik elements), W [O][I]; as gpt2__skinny_kernel. Grid: (O / 64
   rounded up, pieces); block: 128 threads. Ik a multiple of 16, n <= 8. */
template <typename T>
__global__ void __launch_bounds__(128) skinny_wg(const T *__restrict__ W, const T *__restrict__ X, void *__restrict__ D,
                                                 const T *__restrict__ bias, int O, int n, int I, int Ik, int ldd, int out_f32) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int KC = WG_KC, ST = WG_ST, SB = WG_COLS * KC * 2; /* stage bytes */
    extern __shared__ __align__(16) unsigned char wg_sh[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)wg_sh + 1023) & ~(uintptr_t)1023), *xs = ring + ST * SB;
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int o0 = blockIdx.x * WG_COLS, piece = blockIdx.y, nch = (Ik + KC - 1) / KC;
    const T *Wp = W + (size_t)piece * Ik, *Xp = X + (size_t)piece * Ik;
    const uint64_t pol = gpt2__evict_first();
    for (int c = 0; c < ST - 1; c++) wg_issue(ring, c, nch, tid, Wp, o0, O, I, Ik, pol);
    const int g = lane >> 2, t = lane & 3, oc = o0 + 16 * w + g; /* this thread's columns oc, oc + 8; rows 2t, 2t + 1 */
    float bz[2] = {0.0f, 0.0f};
    if (bias && !out_f32) {
        if (oc < O) bz[0] = gpt2__f(bias[oc]);
        if (oc + 8 < O) bz[1] = gpt2__f(bias[oc + 8]);
    }
    gpt2__pdl_enter();
    /* X's rows, swizzled as the W stages: row r, K chunk q8 (8 elements) at (q8 / 8) 1024 + r 128 + ((q8 % 8) ^ r) 16 */
    const int xq = (Ik + 7) / 8, xb = (Ik + 63) / 64;
    for (int i = tid; i < WG_XROWS * xb * 8; i += 128) {
        const int r = i / (xb * 8), q8 = i % (xb * 8);
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < n && q8 < xq) v = *(const uint4 *)(Xp + (size_t)r * I + q8 * 8);
        *(uint4 *)(xs + (q8 >> 3) * 1024 + r * 128 + (((q8 & 7) ^ r) << 4)) = v;
    }
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    wg_chain<T, false>(d, ring, xs, nch, tid, Wp, o0, O, I, Ik, pol);
    wg_each(d, oc, t, O, n, [&](int col, int r, int h, float v) {
        if (out_f32) ((float *)D)[((size_t)piece * n + r) * ldd + col] = v;
        else gpt2__put((T *)D + (size_t)r * ldd + col, v + bz[h]);
    });
#else
    (void)W; (void)X; (void)D; (void)bias; (void)O; (void)n; (void)I; (void)Ik; (void)ldd; (void)out_f32;
#endif
}


/* The LN-folded form (gpt2__lnf_run's product: qkv and the MLP's first product of a step of <= 2 decode rows): as
   skinny_wg, but X's rows are the layer norm of the residual rows lnf names, computed by the block (gpt2__lnf_row
   with LNW warps playing gpt2__residual_ln_kernel's 256 threads, block (0, 0) writing the updated residual), and
   with gelu the epilogue's GELU of the rounded sum (as gpt2__skinny_kernel). Grid: O / 64 rounded up; block: LNW
   warps, the first four (one warpgroup) streaming W and issuing the wgmmas, the rest helping with the LN alone. */
static size_t lnf_wg_smem(int C, int n) { return wg_smem(C) + (size_t)n * C * 2; }

template <typename T, int LNW, int LE>
__global__ void __launch_bounds__(32 * LNW) lnf_wg(const T *__restrict__ W, T *__restrict__ D, const T *__restrict__ bias, int O,
                                                   int n, int C, int gelu, gpt2__lnf<T> lnf) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int KC = WG_KC, ST = WG_ST, SB = WG_COLS * KC * 2;
    extern __shared__ __align__(16) unsigned char wg_sh[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)wg_sh + 1023) & ~(uintptr_t)1023), *xs = ring + ST * SB;
    const int xb = (C + 63) / 64;
    T *yb = (T *)(xs + (size_t)WG_XROWS * xb * 128); /* the LN's n plain rows */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int o0 = blockIdx.x * WG_COLS, nch = (C + KC - 1) / KC;
    /* the warpgroup, warp-uniform as the compiler sees it (a branch on threadIdx alone would serialize the wgmmas) */
    const int wgi = LNW > 4 ? __shfl_sync(0xffffffffu, tid >> 7, 0) : 0;
    /* no L2 policy on this form's weight copies: with one (gpt2__cp16_pol, as skinny_wg and gpt2__skinny_kernel
       stream theirs) every block stopped on an illegal instruction at the first refill once K has more chunks than
       the ring less one (C 1600), and without it the form runs and gives the same bits (RESULTS.md item 113,
       twenty-third session). Why the operand faults here and not in skinny_wg's same refills is not known (a policy
       made right before each copy faults too). */
    const uint64_t pol = 0;
    if (wgi == 0)
        for (int c = 0; c < ST - 1; c++) wg_issue<T, false>(ring, c, nch, tid, W, o0, O, C, C, pol);
    const int g = lane >> 2, t = lane & 3, oc = o0 + 16 * (w & 3) + g;
    float bz[2] = {0.0f, 0.0f};
    if (wgi == 0) {
        if (oc < O) bz[0] = gpt2__f(bias[oc]);
        if (oc + 8 < O) bz[1] = gpt2__f(bias[oc + 8]);
    }
    constexpr int LV = 256 / (32 * LNW);
    float4 lg[LV][LE], lb[LV][LE], lbi[LV][LE];
    gpt2__lnf_params<T, LNW, LE>(lnf, C, lg, lb, lbi);
    gpt2__pdl_enter();
    __shared__ float lsh[8];
    for (int r = 0; r < n; r++) gpt2__lnf_row<T, LNW, LE>(lnf, r, C, yb + (size_t)r * C, blockIdx.x == 0, lg, lb, lbi, lsh);
    __syncthreads();
    /* the rows into wgmma's layout (as skinny_wg's X; rows n..7 zeros), every thread the same trip count (with a
       trip count by thread the compiler serializes the wgmmas after it, C7520) */
    for (int i0 = 0; i0 < WG_XROWS * xb * 8; i0 += 32 * LNW) {
        const int i = i0 + tid;
        if (i >= WG_XROWS * xb * 8) continue;
        const int r = i / (xb * 8), q8 = i % (xb * 8);
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < n && q8 * 8 < C) v = *(const uint4 *)(yb + (size_t)r * C + q8 * 8);
        *(uint4 *)(xs + (q8 >> 3) * 1024 + r * 128 + (((q8 & 7) ^ r) << 4)) = v;
    }
    gpt2__fence_async_smem();
    __syncthreads();
    if (wgi != 0) return;
    __syncwarp(); /* wgmma's .aligned forms want every warp converged */
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    wg_chain<T, (LNW > 4), false>(d, ring, xs, nch, tid, W, o0, O, C, C, pol);
    wg_each(d, oc, t, O, n, [&](int col, int r, int h, float s) {
        T v;
        gpt2__put(&v, s + bz[h]);
        if (gelu) gpt2__put(&v, gpt2__gelu(gpt2__f(v)));
        D[(size_t)r * O + col] = v;
    });
#else
    (void)W; (void)D; (void)bias; (void)O; (void)n; (void)C; (void)gelu; (void)lnf;
#endif
}

__global__ void fillf(float *p, size_t n, uint32_t seed, float s, float off) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15;
        p[i] = ((x & 0xFFFF) / 65536.0f - 0.5f) * s + off;
    }
}

__global__ void fill(uint16_t *p, size_t n, uint32_t seed, float s, int bf) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15;
        const float v = ((x & 0xFFFF) / 65536.0f - 0.5f) * s;
        if (bf) { __nv_bfloat16 h = __float2bfloat16(v); memcpy(&p[i], &h, 2); }
        else { __half h = __float2half(v); memcpy(&p[i], &h, 2); }
    }
}

/* median µs a product of L chained launches (the first plain, the rest programmatic dependent launches), 10 replays */
template <typename F> static float chain_us(int L, F launch) {
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (int i = 0; i < L; i++) launch(st, i, i > 0);
    CU(cudaStreamSynchronize(st));
    cudaGraph_t gr;
    cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < L; i++) launch(st, i, i > 0);
    CU(cudaStreamEndCapture(st, &gr));
    CU(cudaGraphInstantiate(&ge, gr, 0));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < 11; r++) {
        CU(cudaEventRecord(e0, st));
        CU(cudaGraphLaunch(ge, st));
        CU(cudaEventRecord(e1, st));
        CU(cudaEventSynchronize(e1));
        float ms;
        CU(cudaEventElapsedTime(&ms, e0, e1));
        if (r) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(gr));
    CU(cudaStreamDestroy(st));
    return t[t.size() / 2] * 1000.0f / L;
}

struct Shape { const char *name; int O, I, splits; };

template <typename T>
static void run(const char *ty, const Shape &sh, int sms, bool timing) {
    const int O = sh.O, I = sh.I, splits = sh.splits, Ik = I / splits, L = 12, out_f32 = splits > 1;
    const size_t wn = (size_t)O * I;
    T *W, *X, *b;
    void *D1, *D2;
    CU(cudaMalloc(&W, wn * L * sizeof(T)));
    CU(cudaMalloc(&X, (size_t)16 * I * sizeof(T)));
    CU(cudaMalloc(&b, O * sizeof(T)));
    const size_t dn = (size_t)splits * 16 * O * 4;
    CU(cudaMalloc(&D1, dn));
    CU(cudaMalloc(&D2, dn));
    const int bf = sizeof(T) == 2 && !std::is_same<T, __half>::value;
    fill<<<1024, 256>>>((uint16_t *)W, wn * L, 2, 0.25f, bf);
    fill<<<64, 256>>>((uint16_t *)X, (size_t)16 * I, 1, 4.0f, bf);
    fill<<<8, 256>>>((uint16_t *)b, O, 3, 1.0f, bf);
    CU(cudaGetLastError());
    const int wide = (long long)(O / (8 * GPT2__SK_NW_WIDE)) * splits >= 2LL * sms;
    if (!(wide ? gpt2__skinny_enable<T, GPT2__SK_NW_WIDE>() : gpt2__skinny_enable<T>())) { printf("gpt2__skinny_kernel cannot run here\n"); exit(1); }
    CU(cudaFuncSetAttribute(skinny_wg<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)wg_smem(Ik)));
    auto sk = [&](cudaStream_t st, int i, int pdl, void *D, int n) {
        const T *Wi = W + wn * i;
        if (wide) gpt2__skinny_run<T, GPT2__SK_NW_WIDE>(st, pdl, D, Wi, X, b, O, n, I, out_f32, O, splits);
        else gpt2__skinny_run<T>(st, pdl, D, Wi, X, b, O, n, I, out_f32, O, splits);
    };
    auto wg = [&](cudaStream_t st, int i, int pdl, void *D, int n) {
        gpt2__launch(skinny_wg<T>, dim3((O + WG_COLS - 1) / WG_COLS, splits), dim3(128), wg_smem(Ik), st, pdl, (const T *)(W + wn * i),
                     (const T *)X, D, out_f32 ? (const T *)NULL : (const T *)b, O, n, I, Ik, O, out_f32);
    };
    for (int n = 1; n <= 2; n++) {
        CU(cudaMemset(D1, 0xFF, dn));
        CU(cudaMemset(D2, 0x7F, dn));
        sk(0, 0, 0, D1, n);
        wg(0, 0, 0, D2, n);
        CU(cudaGetLastError());
        CU(cudaDeviceSynchronize());
        const size_t cnt = out_f32 ? (size_t)splits * n * O : (size_t)n * O, es = out_f32 ? 4 : sizeof(T);
        std::vector<unsigned char> h1(cnt * es), h2(cnt * es);
        CU(cudaMemcpy(h1.data(), D1, cnt * es, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(h2.data(), D2, cnt * es, cudaMemcpyDeviceToHost));
        size_t diff = 0;
        for (size_t i = 0; i < cnt; i++) diff += memcmp(&h1[i * es], &h2[i * es], es) != 0;
        printf("%-4s %-24s %5d x %5d / %d, %d row%s: outputs differing bit for bit %zu of %zu", ty, sh.name, O, I, splits, n,
               n > 1 ? "s" : " ", diff, cnt);
        if (timing) {
            const float a = chain_us(L, [&](cudaStream_t st, int i, int pdl) { sk(st, i, pdl, D1, n); });
            const float c = chain_us(L, [&](cudaStream_t st, int i, int pdl) { wg(st, i, pdl, D2, n); });
            printf("; chained, µs a product: gpt2__skinny_kernel (%d warp%s) %.2f, wgmma form %.2f (%+.1f%%)", wide ? GPT2__SK_NW_WIDE : GPT2__SK_NW,
                   (wide ? GPT2__SK_NW_WIDE : GPT2__SK_NW) > 1 ? "s" : "", a, c, 100.0 * (c - a) / a);
        }
        printf("\n");
    }
    CU(cudaFree(W)); CU(cudaFree(X)); CU(cudaFree(b)); CU(cudaFree(D1)); CU(cudaFree(D2));
}

/* The LN-folded products of a batch-1 step: gpt2__skinny_kernel with LNE (gpt2__lnf_run, 8 warps of 8 columns)
   against lnf_wg with 4 and 8 warps; bits of D and of the updated residual, and µs a product chained. */
struct LnShape { const char *name; int O, C, splits, gelu; };

template <typename T, int LE>
static void run_lnf(const char *ty, const LnShape &sh, bool timing) {
    const int O = sh.O, C = sh.C, L = 12;
    const size_t wn = (size_t)O * C;
    T *W, *b, *lbias, *D0, *D1, *D2;
    float *x, *xo0, *xo1, *xo2, *part, *g, *bb;
    CU(cudaMalloc(&W, wn * L * sizeof(T)));
    CU(cudaMalloc(&b, O * sizeof(T)));
    CU(cudaMalloc(&lbias, C * sizeof(T)));
    CU(cudaMalloc(&D0, 2 * O * sizeof(T))); CU(cudaMalloc(&D1, 2 * O * sizeof(T))); CU(cudaMalloc(&D2, 2 * O * sizeof(T)));
    CU(cudaMalloc(&x, 2 * C * 4)); CU(cudaMalloc(&xo0, 2 * C * 4)); CU(cudaMalloc(&xo1, 2 * C * 4)); CU(cudaMalloc(&xo2, 2 * C * 4));
    CU(cudaMalloc(&part, 4 * 2 * C * 4)); CU(cudaMalloc(&g, C * 4)); CU(cudaMalloc(&bb, C * 4));
    const int bf = !std::is_same<T, __half>::value;
    fill<<<1024, 256>>>((uint16_t *)W, wn * L, 2, 0.25f, bf);
    fill<<<8, 256>>>((uint16_t *)b, O, 3, 1.0f, bf);
    fill<<<8, 256>>>((uint16_t *)lbias, C, 4, 0.5f, bf);
    fillf<<<8, 256>>>(x, 2 * C, 5, 4.0f, 0.3f);
    fillf<<<8, 256>>>(part, 8 * C, 6, 1.0f, 0.0f);
    fillf<<<8, 256>>>(g, C, 7, 0.5f, 1.0f);
    fillf<<<8, 256>>>(bb, C, 8, 0.2f, 0.0f);
    CU(cudaGetLastError());
    int optin = 0, dev = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (!gpt2__lnf_enable_e<T, LE, false>(optin)) { printf("gpt2__lnf cannot run here\n"); exit(1); }
    CU(cudaFuncSetAttribute(lnf_wg<T, 4, LE>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)lnf_wg_smem(C, 2)));
    CU(cudaFuncSetAttribute(lnf_wg<T, 8, LE>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)lnf_wg_smem(C, 2)));
    for (int n = 1; n <= 2; n++) {
        const gpt2__lnf<T> f0 = {x, xo0, part, (size_t)n * C, sh.splits, lbias, g, bb, 1e-5f};
        gpt2__lnf<T> f1 = f0, f2 = f0;
        f1.xo = xo1; f2.xo = xo2;
        auto ref = [&](cudaStream_t st, int i, int pdl, T *D, const gpt2__lnf<T> &f) {
            gpt2__launch(gpt2__skinny_kernel<T, false, GPT2__LNF_NW, GPT2__SK_KC, GPT2__LNF_ST, LE>,
                         dim3((unsigned)((O + 8 * GPT2__LNF_NW - 1) / (8 * GPT2__LNF_NW)), 1u), dim3(32 * GPT2__LNF_NW),
                         gpt2__skinny_smem(n, C, sizeof(T), GPT2__LNF_NW, GPT2__SK_KC, GPT2__LNF_ST), st, pdl, (const T *)(W + wn * i),
                         (const T *)NULL, (void *)D, (const T *)b, O, n, C, C, O, 0, sh.gelu, f, gpt2__amax{NULL, 0});
        };
        auto w4 = [&](cudaStream_t st, int i, int pdl, T *D, const gpt2__lnf<T> &f) {
            gpt2__launch(lnf_wg<T, 4, LE>, dim3((O + 63) / 64), dim3(128), lnf_wg_smem(C, n), st, pdl, (const T *)(W + wn * i), D,
                         (const T *)b, O, n, C, sh.gelu, f);
        };
        auto w8 = [&](cudaStream_t st, int i, int pdl, T *D, const gpt2__lnf<T> &f) {
            gpt2__launch(lnf_wg<T, 8, LE>, dim3((O + 63) / 64), dim3(256), lnf_wg_smem(C, n), st, pdl, (const T *)(W + wn * i), D,
                         (const T *)b, O, n, C, sh.gelu, f);
        };
        CU(cudaMemset(D0, 0xFF, 2 * O * sizeof(T))); CU(cudaMemset(D1, 0x7F, 2 * O * sizeof(T))); CU(cudaMemset(D2, 0x7E, 2 * O * sizeof(T)));
        CU(cudaMemset(xo0, 0xFF, 2 * C * 4)); CU(cudaMemset(xo1, 0x7F, 2 * C * 4)); CU(cudaMemset(xo2, 0x7E, 2 * C * 4));
        ref(0, 0, 0, D0, f0);
        CU(cudaDeviceSynchronize());
        w4(0, 0, 0, D1, f1);
        CU(cudaDeviceSynchronize());
        w8(0, 0, 0, D2, f2);
        CU(cudaGetLastError());
        CU(cudaDeviceSynchronize());
        std::vector<uint16_t> h0(n * O), h1(n * O), h2(n * O);
        std::vector<float> r0(n * C), r1(n * C), r2(n * C);
        CU(cudaMemcpy(h0.data(), D0, n * O * 2, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(h1.data(), D1, n * O * 2, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(h2.data(), D2, n * O * 2, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(r0.data(), xo0, n * C * 4, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(r1.data(), xo1, n * C * 4, cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(r2.data(), xo2, n * C * 4, cudaMemcpyDeviceToHost));
        size_t d1 = 0, d2 = 0, x1 = 0, x2 = 0;
        for (int i = 0; i < n * O; i++) { d1 += h0[i] != h1[i]; d2 += h0[i] != h2[i]; }
        for (int i = 0; i < n * C; i++) { x1 += memcmp(&r0[i], &r1[i], 4) != 0; x2 += memcmp(&r0[i], &r2[i], 4) != 0; }
        printf("%-4s LN-folded %-16s %5d x %5d, %d row%s: outputs differing bit for bit, 4 warps %zu, 8 warps %zu of %d; residual %zu, %zu of %d",
               ty, sh.name, O, C, n, n > 1 ? "s" : " ", d1, d2, n * O, x1, x2, n * C);
        if (timing) {
            const float a = chain_us(L, [&](cudaStream_t st, int i, int pdl) { ref(st, i, pdl, D0, f0); });
            const float c4 = chain_us(L, [&](cudaStream_t st, int i, int pdl) { w4(st, i, pdl, D1, f1); });
            const float c8 = chain_us(L, [&](cudaStream_t st, int i, int pdl) { w8(st, i, pdl, D2, f2); });
            printf("; chained, µs a product: gpt2__skinny_kernel LNE %.2f, wgmma 4 warps %.2f (%+.1f%%), 8 warps %.2f (%+.1f%%)", a, c4,
                   100.0 * (c4 - a) / a, c8, 100.0 * (c8 - a) / a);
        }
        printf("\n");
    }
    CU(cudaFree(W)); CU(cudaFree(b)); CU(cudaFree(lbias)); CU(cudaFree(D0)); CU(cudaFree(D1)); CU(cudaFree(D2));
    CU(cudaFree(x)); CU(cudaFree(xo0)); CU(cudaFree(xo1)); CU(cudaFree(xo2)); CU(cudaFree(part)); CU(cudaFree(g)); CU(cudaFree(bb));
}

int main(int argc, char **argv) {
    int dev = 0, sms = 0, major = 0;
    CU(cudaGetDevice(&dev));
    CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 9) { printf("needs sm_90 (wgmma)\n"); return 1; }
    int built = 0; /* gpt2.cuh's flag: the code running here has its wgmma (built for sm_90a) */
    CU(cudaMemcpyFromSymbol(&built, gpt2__built_wg, sizeof built));
    if (!built) { printf("needs code built for sm_90a\n"); return 1; }
    const Shape shapes[] = {
        {"124M qkv", 2304, 768, 1}, {"124M attention proj", 768, 768, 2}, {"124M MLP first", 3072, 768, 1},
        {"124M MLP proj", 768, 3072, 4}, {"124M lm_head", 50304, 768, 1},
        {"1558M qkv", 4800, 1600, 1}, {"1558M attention proj", 1600, 1600, 4}, {"1558M MLP first", 6400, 1600, 1},
        {"1558M MLP proj", 1600, 6400, 4},
    };
    const bool lnf_only = argc > 1 && !strcmp(argv[1], "lnf");
    if (!lnf_only) {
        for (const Shape &s : shapes) run<__half>("f16", s, sms, true);
        for (const Shape &s : shapes) run<__nv_bfloat16>("bf16", s, sms, false);
    }
    const LnShape ln[] = {{"124M qkv", 2304, 768, 4, 0}, {"124M MLP first", 3072, 768, 2, 1},
                          {"1558M qkv", 4800, 1600, 4, 0}, {"1558M MLP first", 6400, 1600, 4, 1}};
    const int from = argc > 2 ? atoi(argv[2]) : 0; /* bench/skinny_wg lnf 2: the 1558M shapes alone */
    for (int i = from; i < 2; i++) run_lnf<__half, 1>("f16", ln[i], true);
    for (int i = 2; i < 4; i++) run_lnf<__half, 2>("f16", ln[i], true);
    for (int i = 0; i < 2; i++) run_lnf<__nv_bfloat16, 1>("bf16", ln[i], false);
    for (int i = 2; i < 4; i++) run_lnf<__nv_bfloat16, 2>("bf16", ln[i], false);
    return 0;
}
