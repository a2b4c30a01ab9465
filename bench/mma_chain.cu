/* mma_chain — how long the dependent chain of a few-row product takes on one SM, with its operands already in shared
   memory (RESULTS.md item 112), and whether Hopper's wgmma gives it the same bits:
   - mma.sync: gpt2__skinny_kernel's form. A warp owns 8 output columns; per 32 of K it does one ldmatrix of W, one
     of X and two m16n8k16 MMAs into one accumulator (K / 16 dependent MMAs); blocks of 1, 2 and 8 warps.
   - wgmma (sm_90a builds): m64n8k16 with W as the A operand (64 output columns a warpgroup) and X's rows as B, both
     in shared memory as 8x8 core matrices without swizzle. The K / 16 instructions go back to back into one
     accumulator and are waited for once; 1 or 2 warpgroups a block, each with its own accumulator, same tiles.
   Each output is sum over K of X[r][k] W[o][k] in fp32, 16 of K per step, steps in order: the sum the skinny kernel
   and cuBLASLt's pinned algorithm compute. The program checks both forms against a double-precision sum (both
   meanings of the descriptor's two strides are tried; the one that is right is timed) and counts the outputs whose
   bits agree between the forms, F16 and BF16, K 768 and 1600 (124M's n_embd and 1558M's), 8 rows of X.
   Time: clock64 in thread 0 around the chain (after the operands are staged, until its result is read), median of 9
   launches of one block. Usage: bench/mma_chain */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh" /* its device helpers: gpt2__mma, gpt2__ldsm4, gpt2__fence_async_smem */

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)
static const int ROWS = 8, COLS = 64; /* X rows; W rows (output columns) one warpgroup owns */

/* a use of v the clock read after it must wait for */
static __device__ __forceinline__ void touch(float v) { asm volatile("mov.b32 %0, %0;\n" : "+f"(v)); }

/* mma.sync form: W [8 NW][K], X [ROWS][K] row-major in global; D [ROWS][8 NW] fp32. Warp w: columns 8w..8w+7. */
template <typename T, int K>
__global__ void chain_mma(const T *W, const T *X, float *D, long long *cyc) {
    constexpr int LD = K + 8;
    extern __shared__ __align__(16) unsigned char sh[];
    const int NW = blockDim.x / 32, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    T *Ws = (T *)sh, *Xs = Ws + 8 * NW * LD;
    for (int i = tid; i < 8 * NW * K; i += blockDim.x) Ws[(i / K) * LD + i % K] = W[i];
    for (int i = tid; i < ROWS * K; i += blockDim.x) Xs[(i / K) * LD + i % K] = X[i];
    __syncthreads();
    const T *Wc = Ws + (w * 8 + (lane & 7)) * LD + 8 * (lane >> 3), *Xc = Xs + (lane & 7) * LD + 8 * (lane >> 3);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const long long t0 = clock64();
#pragma unroll 4
    for (int kk = 0; kk < K; kk += 32) {
        uint32_t b[4], xa[4], a0[4], a1[4];
        gpt2__ldsm4(b, Wc + kk);
        gpt2__ldsm4(xa, Xc + kk);
        a0[0] = xa[0]; a0[2] = xa[1]; a1[0] = xa[2]; a1[2] = xa[3];
        a0[1] = a0[3] = a1[1] = a1[3] = 0u;
        gpt2__mma(acc, a0, b[0], b[1], T());
        if (kk + 16 < K) gpt2__mma(acc, a1, b[2], b[3], T());
    }
    touch(acc[0] + acc[1] + acc[2] + acc[3]);
    const long long t1 = clock64();
    const int g = lane >> 2, col = w * 8 + 2 * (lane & 3);
    D[g * 8 * NW + col] = acc[0];
    D[g * 8 * NW + col + 1] = acc[1];
    if (tid == 0) *cyc = t1 - t0;
}

/* wgmma form: W [COLS][K], X [ROWS][K] in global; D [ROWS][COLS]. Shared memory as core matrices: W element (o, k) at
   ((k / 8) COLS + o) 8 + k % 8, X element (r, k) at ((k / 8) ROWS + r) 8 + k % 8. SW: 0, the descriptor's leading
   byte offset is the step between core matrices along K and its stride byte offset the step along M/N; 1, the
   other way round. Every warpgroup runs the same chain on the same tiles. */
template <typename T, int K, int SW>
__global__ void chain_wgmma(const T *W, const T *X, float *D, long long *cyc) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char sh[]; /* dynamic shared memory starts 1024-byte aligned */
    const int tid = threadIdx.x, w = (tid >> 5) & 3, lane = tid & 31;
    T *Ws = (T *)sh, *Xs = Ws + COLS * K;
    for (int i = tid; i < COLS * K; i += blockDim.x) Ws[((i % K) / 8 * COLS + i / K) * 8 + i % 8] = W[i];
    for (int i = tid; i < ROWS * K; i += blockDim.x) Xs[((i % K) / 8 * ROWS + i / K) * 8 + i % 8] = X[i];
    gpt2__fence_async_smem(); /* the stores above, before wgmma reads them */
    __syncthreads();
    const uint64_t wa = (uint32_t)__cvta_generic_to_shared(Ws), xa = (uint32_t)__cvta_generic_to_shared(Xs);
    /* along K a core matrix is COLS (W) or ROWS (X) core-matrix rows of 16 bytes on; along M/N, 8 rows of 16 bytes */
    const uint64_t wk = COLS * 16, xk = ROWS * 16, mn = 128;
    const uint64_t wl = SW ? mn : wk, ws = SW ? wk : mn, xl = SW ? mn : xk, xs = SW ? xk : mn;
    const uint64_t wd = ((wl >> 4) << 16) | ((ws >> 4) << 32), xd = ((xl >> 4) << 16) | ((xs >> 4) << 32);
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 4; i++) asm volatile("" : "+f"(d[i])::"memory");
    const long long t0 = clock64();
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int s = 0; s < K / 16; s++) {
        /* step s: K 16 s..16 s+15, core matrices 2 s and 2 s + 1 along K */
        const uint64_t da = wd | (((wa + 2 * s * wk) & 0x3FFFF) >> 4), db = xd | (((xa + 2 * s * xk) & 0x3FFFF) >> 4);
        if constexpr (std::is_same<T, __half>::value)
            asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;\n"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(da), "l"(db) : "memory");
        else
            asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;\n"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(da), "l"(db) : "memory");
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < 4; i++) asm volatile("" : "+f"(d[i])::"memory");
    touch(d[0] + d[1] + d[2] + d[3]);
    const long long t1 = clock64();
    if (tid < 128) { /* d: output column (M) 16 w + g (+8), X row (N) 2 (lane % 4) + {0, 1} */
        const int o = 16 * w + (lane >> 2), r = 2 * (lane & 3);
        D[r * COLS + o] = d[0];
        D[(r + 1) * COLS + o] = d[1];
        D[r * COLS + o + 8] = d[2];
        D[(r + 1) * COLS + o + 8] = d[3];
    }
    if (tid == 0) *cyc = t1 - t0;
#else
    if (threadIdx.x == 0) *cyc = -1; /* not built for sm_90a */
#endif
}

static float to_f(__half v) { return __half2float(v); }
static float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> static T from_f(float v);
template <> __half from_f<__half>(float v) { return __float2half(v); }
template <> __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

struct Dev { void *W, *X; float *D; long long *cyc; };

template <typename K_>
static int timed(K_ launch, long long *cyc, long long &med) {
    long long c[9];
    for (int i = 0; i < 9; i++) {
        launch();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(&c[i], cyc, sizeof c[i], cudaMemcpyDeviceToHost));
    }
    std::sort(c, c + 9);
    med = c[4];
    return 0;
}

template <typename T, int K>
static int run(const char *ty, const Dev &dv) {
    /* operands: W uniform in [-1, 1), X in [-2, 2), from a fixed LCG */
    std::vector<T> w((size_t)COLS * K), x((size_t)ROWS * K);
    uint32_t s = 12345u + K;
    auto u = [&s]() { s = s * 1664525u + 1013904223u; return (s >> 8) / 16777216.0f; };
    for (auto &v : w) v = from_f<T>(2.0f * u() - 1.0f);
    for (auto &v : x) v = from_f<T>(4.0f * u() - 2.0f);
    std::vector<double> ref(ROWS * COLS);
    double top = 0.0;
    for (int r = 0; r < ROWS; r++)
        for (int o = 0; o < COLS; o++) {
            double a = 0.0;
            for (int k = 0; k < K; k++) a += (double)to_f(x[(size_t)r * K + k]) * to_f(w[(size_t)o * K + k]);
            ref[r * COLS + o] = a;
            top = std::max(top, std::fabs(a));
        }
    CK(cudaMemcpy(dv.W, w.data(), w.size() * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv.X, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice));
    const T *W = (const T *)dv.W, *X = (const T *)dv.X;
    auto fetch = [&](std::vector<float> &h) { return cudaMemcpy(h.data(), dv.D, h.size() * sizeof(float), cudaMemcpyDeviceToHost); };
    auto err = [&](const std::vector<float> &h) {
        double e = 0.0;
        for (int i = 0; i < ROWS * COLS; i++) e = std::max(e, std::fabs(h[i] - ref[i]));
        return e;
    };
    const double tol = 1e-3 * (1.0 + top);

    /* mma.sync: 8 warps give all 64 columns for the checks; the chain timed at 1, 2 and 8 warps */
    const int shm = (COLS + ROWS) * (K + 8) * (int)sizeof(T);
    CK(cudaFuncSetAttribute(chain_mma<T, K>, cudaFuncAttributeMaxDynamicSharedMemorySize, shm));
    std::vector<float> hm(ROWS * COLS), hw(ROWS * COLS);
    for (int nw : {1, 2, 8}) {
        long long c;
        if (timed([&] { chain_mma<T, K><<<1, 32 * nw, shm>>>(W, X, dv.D, dv.cyc); }, dv.cyc, c)) return 1;
        printf("%-4s K %4d  mma.sync m16n8k16, %d warp%s: %6lld cycles, %5.1f a step\n", ty, K, nw, nw > 1 ? "s" : " ", c, c / (K / 16.0));
    }
    chain_mma<T, K><<<1, 256, shm>>>(W, X, dv.D, dv.cyc);
    CK(cudaDeviceSynchronize());
    CK(fetch(hm));
    const double em = err(hm);
    printf("%-4s K %4d  mma.sync: max |diff| from the double sum %.3g (tolerance %.3g): %s\n", ty, K, em, tol, em <= tol ? "ok" : "WRONG");

    /* wgmma: each reading of the strides; the right one is timed and compared bit for bit */
    const int shw = (COLS + ROWS) * K * (int)sizeof(T);
    void (*kern[2])(const T *, const T *, float *, long long *) = {chain_wgmma<T, K, 0>, chain_wgmma<T, K, 1>};
    for (int sw = 0; sw < 2; sw++) {
        CK(cudaFuncSetAttribute(kern[sw], cudaFuncAttributeMaxDynamicSharedMemorySize, shw));
        CK(cudaMemset(dv.D, 0, ROWS * COLS * sizeof(float)));
        kern[sw]<<<1, 128, shw>>>(W, X, dv.D, dv.cyc);
        CK(cudaDeviceSynchronize());
        long long c;
        CK(cudaMemcpy(&c, dv.cyc, sizeof c, cudaMemcpyDeviceToHost));
        if (c < 0) { printf("%-4s K %4d  wgmma: not built for sm_90a\n", ty, K); return 0; }
        CK(fetch(hw));
        const double ew = err(hw);
        if (ew > tol) { printf("%-4s K %4d  wgmma, stride reading %d: max |diff| %.3g: wrong layout\n", ty, K, sw, ew); continue; }
        int same = 0;
        for (int i = 0; i < ROWS * COLS; i++) same += !memcmp(&hm[i], &hw[i], sizeof(float));
        printf("%-4s K %4d  wgmma, stride reading %d: max |diff| %.3g: ok; bits equal to mma.sync in %d of %d outputs\n", ty, K, sw, ew, same, ROWS * COLS);
        for (int nwg : {1, 2}) {
            if (timed([&] { kern[sw]<<<1, 128 * nwg, shw>>>(W, X, dv.D, dv.cyc); }, dv.cyc, c)) return 1;
            printf("%-4s K %4d  wgmma m64n8k16, %d warpgroup%s: %6lld cycles, %5.1f a step\n", ty, K, nwg, nwg > 1 ? "s" : " ", c, c / (K / 16.0));
        }
    }
    return 0;
}

int main() {
    cudaDeviceProp p;
    int khz = 0;
    CK(cudaGetDeviceProperties(&p, 0));
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    printf("mma_chain on %s (sm_%d%d, %d MHz): one block, operands in shared memory, %d rows of X\n", p.name, p.major, p.minor,
           khz / 1000, ROWS);
    if (p.major < 8) { printf("needs sm_80 or newer\n"); return 1; }
    Dev dv;
    CK(cudaMalloc(&dv.W, (size_t)COLS * 1600 * 2));
    CK(cudaMalloc(&dv.X, (size_t)ROWS * 1600 * 2));
    CK(cudaMalloc(&dv.D, ROWS * COLS * sizeof(float)));
    CK(cudaMalloc(&dv.cyc, sizeof(long long)));
    if (run<__half, 768>("f16", dv) || run<__half, 1600>("f16", dv) || run<__nv_bfloat16, 768>("bf16", dv) ||
        run<__nv_bfloat16, 1600>("bf16", dv))
        return 1;
    return 0;
}
