/* bench/midgemm — can a decode product of our own beat cuBLASLt at 128–1024 rows and keep the pinned class's bits?
   A plain tiled mma.sync GEMM (block tile BM x BN of WM x WN warps, 32 of K a stage through ST cp.async stages,
   ldmatrix operands; every output an fp32 chain over K in order, 16 at a time, from 0, then + bias rounded to
   fp16: what gpt2__skinny_kernel computes and what cuBLASLt's decode kernels compute, RESULTS.md item 33) against
   cuBLASLt's heuristic pick with the bias epilogue, on the same random operands. Each timed as 20 launches in a
   CUDA graph, best of 5 replays. Prints µs, TFLOP/s, the grid, and how many outputs differ bit for bit from
   cuBLASLt's. RESULTS.md item 95. Build: make bench/midgemm. */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh" /* its device helpers: gpt2__cp16, gpt2__cp_commit, gpt2__cp_wait, gpt2__ldsm4, gpt2__mma */

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#define CU(x) do { cudaError_t e_ = (x); if (e_) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define LT(x) do { cublasStatus_t s_ = (x); if (s_) { printf("%s:%d cublas %d\n", __FILE__, __LINE__, (int)s_); exit(1); } } while (0)

// block: WM x WN warps, warp tile (BM/WM) x (BN/WN); BK = 32 per stage, ST stages
template <int BM, int BN, int WM, int WN, int ST>
__global__ void __launch_bounds__(32 * WM * WN) midgemm(const __half *X, const __half *W, const __half *bias, __half *D, int M, int N, int K) {
    constexpr int BK = 32, LD = BK + 8, TM = BM / WM / 16, TN = BN / WN / 8, NT = 32 * WM * WN;
    extern __shared__ __align__(16) unsigned char sh[];
    __half *As = (__half *)sh, *Bs = As + ST * BM * LD;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wm = warp / WN, wn = warp % WN;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, nk = K / BK;
    auto issue = [&](int c) {
        if (c < nk) {
            __half *a = As + (c % ST) * BM * LD, *b = Bs + (c % ST) * BN * LD;
            for (int i = tid; i < BM * 4; i += NT) { int r = i >> 2, q = (i & 3) * 8; bool ok = m0 + r < M;
                gpt2__cp16(a + r * LD + q, X + (size_t)(ok ? m0 + r : 0) * K + c * BK + q, ok); }
            for (int i = tid; i < BN * 4; i += NT) { int r = i >> 2, q = (i & 3) * 8; bool ok = n0 + r < N;
                gpt2__cp16(b + r * LD + q, W + (size_t)(ok ? n0 + r : 0) * K + c * BK + q, ok); }
        }
        gpt2__cp_commit();
    };
    for (int c = 0; c < ST - 1; c++) issue(c);
    float acc[TM][TN][4];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    for (int c = 0; c < nk; c++) {
        gpt2__cp_wait<ST - 2>();
        __syncthreads();
        issue(c + ST - 1);
        const __half *a = As + (c % ST) * BM * LD, *b = Bs + (c % ST) * BN * LD;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t af[TM][4], bf[TN][2];
#pragma unroll
            for (int i = 0; i < TM; i++)
                gpt2__ldsm4(af[i], a + (wm * TM * 16 + i * 16 + (lane & 15)) * LD + kk + (lane >> 4) * 8);
#pragma unroll
            for (int j = 0; j < TN; j += 2) {
                uint32_t r[4];
                gpt2__ldsm4(r, b + (wn * TN * 8 + j * 8 + (lane >> 4) * 8 + (lane & 7)) * LD + kk + ((lane >> 3) & 1) * 8);
                bf[j][0] = r[0]; bf[j][1] = r[1]; bf[j + 1][0] = r[2]; bf[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) gpt2__mma(acc[i][j], af[i], bf[j][0], bf[j][1], __half());
        }
    }
    gpt2__cp_wait<0>();
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            const int col = n0 + wn * TN * 8 + j * 8 + 2 * t;
            if (col >= N) continue;
            const float b0 = __half2float(bias[col]), b1 = __half2float(bias[col + 1]);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = m0 + wm * TM * 16 + i * 16 + g + 8 * h;
                if (row < M) *(__half2 *)(D + (size_t)row * N + col) = __floats2half2_rn(acc[i][j][2 * h] + b0, acc[i][j][2 * h + 1] + b1);
            }
        }
}

__global__ void fill(__half *p, size_t n, uint32_t seed, float s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed; x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15;
        p[i] = __float2half(((x & 0xFFFF) / 65536.0f - 0.5f) * s);
    }
}

template <typename F> static float timeit(F f) {
    cudaStream_t st; CU(cudaStreamCreate(&st));
    for (int i = 0; i < 3; i++) f(st);
    cudaGraph_t g; cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 20; i++) f(st);
    CU(cudaStreamEndCapture(st, &g)); CU(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    float best = 1e9;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(e0, st); CU(cudaGraphLaunch(ge, st)); cudaEventRecord(e1, st); CU(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1); if (ms < best) best = ms;
    }
    return best * 1000.f / 20.f;
}

template <int BM, int BN, int WM, int WN, int ST>
static void run(const char *name, const __half *X, const __half *W, const __half *b, __half *D, int M, int N, int K, const __half *ref) {
    const size_t smem = (size_t)ST * (BM + BN) * 40 * 2;
    auto k = midgemm<BM, BN, WM, WN, ST>;
    CU(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    float us = timeit([&](cudaStream_t st) { k<<<grid, 32 * WM * WN, smem, st>>>(X, W, b, D, M, N, K); });
    CU(cudaGetLastError()); CU(cudaDeviceSynchronize());
    size_t n = (size_t)M * N; unsigned short *h1 = (unsigned short *)malloc(n * 2), *h2 = (unsigned short *)malloc(n * 2);
    CU(cudaMemcpy(h1, D, n * 2, cudaMemcpyDeviceToHost)); CU(cudaMemcpy(h2, ref, n * 2, cudaMemcpyDeviceToHost));
    size_t diff = 0; for (size_t i = 0; i < n; i++) diff += h1[i] != h2[i];
    printf("  %-18s %4d x %4d x %4d: %7.2f us  %5.0f TFLOP/s  grid %d  differ from cuBLASLt %zu of %zu\n", name, M, N, K, us,
           2.0 * M * N * K / us / 1e6, grid.x * grid.y, diff, n);
    free(h1); free(h2);
}

int main() {
    cublasLtHandle_t lt; LT(cublasLtCreate(&lt));
    void *ws; size_t wss = 32 << 20; CU(cudaMalloc(&ws, wss));
    const int shapes[][3] = {{256, 4800, 1600}, {256, 6400, 1600}, {512, 2304, 768}, {512, 3072, 768}, {128, 4800, 1600}, {1024, 2304, 768}};
    for (auto &s : shapes) {
        const int M = s[0], N = s[1], K = s[2];
        __half *X, *W, *b, *D, *R;
        CU(cudaMalloc(&X, (size_t)M * K * 2)); CU(cudaMalloc(&W, (size_t)N * K * 2)); CU(cudaMalloc(&b, N * 2));
        CU(cudaMalloc(&D, (size_t)M * N * 2)); CU(cudaMalloc(&R, (size_t)M * N * 2));
        fill<<<256, 256>>>(X, (size_t)M * K, 1, 4.f); fill<<<256, 256>>>(W, (size_t)N * K, 2, 0.25f); fill<<<8, 256>>>(b, N, 3, 1.f);
        // cuBLASLt: D^T [N][M] col-major view = W X^T; as gpt2.cuh: A = W (transposed op), B = X, bias epilogue
        cublasLtMatmulDesc_t desc; LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
        cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b));
        cudaDataType_t bt = CUDA_R_16F;
        LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        cublasLtMatrixLayout_t la, lb, ld;
        LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, K, N, K)); LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, K, M, K));
        LT(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16F, N, M, N));
        cublasLtMatmulPreference_t pref; LT(cublasLtMatmulPreferenceCreate(&pref));
        LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wss, sizeof wss));
        cublasLtMatmulHeuristicResult_t hr[1]; int got = 0;
        LT(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, hr, &got));
        const float one = 1.f, zero = 0.f;
        float us = timeit([&](cudaStream_t st) { cublasLtMatmul(lt, desc, &one, W, la, X, lb, &zero, R, ld, R, ld, &hr[0].algo, ws, wss, st); });
        CU(cudaDeviceSynchronize());
        printf("%4d x %4d x %4d: cuBLASLt %7.2f us  %5.0f TFLOP/s\n", M, N, K, us, 2.0 * M * N * K / us / 1e6);
        run<64, 128, 2, 2, 4>("64x128 w2x2 st4", X, W, b, D, M, N, K, R);
        run<64, 64, 2, 2, 4>("64x64 w2x2 st4", X, W, b, D, M, N, K, R);
        run<128, 64, 2, 2, 4>("128x64 w2x2 st4", X, W, b, D, M, N, K, R);
        run<128, 128, 2, 4, 4>("128x128 w2x4 st4", X, W, b, D, M, N, K, R);
        run<64, 128, 2, 4, 6>("64x128 w2x4 st6", X, W, b, D, M, N, K, R);
        run<128, 96, 4, 2, 4>("128x96 w4x2 st4", X, W, b, D, M, N, K, R);
        cudaFree(X); cudaFree(W); cudaFree(b); cudaFree(D); cudaFree(R);
        cublasLtMatmulDescDestroy(desc); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb); cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulPreferenceDestroy(pref);
    }
    return 0;
}
