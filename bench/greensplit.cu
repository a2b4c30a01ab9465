/* bench/greensplit — can one part's products run beside the other part's attention if each kind of kernel has its
   own SMs? CUDA green contexts split the SMs into two sets; a stream of each set takes that set's kernels only.
   Measures, on the H100: (1) which SMs a kernel's blocks land on, eager and replayed from a captured graph (is the
   split kept in a graph?); (2) a streaming read of 3 GB (decode attention's K/V of one 512-row part at position
   160) on N SMs: what bandwidth a subset of SMs reaches; (3) that read on one set while one part's 48 products
   (124M, 512 rows, cuBLASLt's pick) run on the other, alone and at once, eager and in a graph.
   Build: make bench/greensplit (links libcuda for the green-context calls). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include <set>
#define CU(x) do { cudaError_t e_ = (x); if (e_) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define DRV(x) do { CUresult r_ = (x); if (r_) { const char *s_ = ""; cuGetErrorString(r_, &s_); printf("%s:%d driver %d %s\n", __FILE__, __LINE__, (int)r_, s_); exit(1); } } while (0)
#define LT(x) do { cublasStatus_t s_ = (x); if (s_) { printf("%s:%d cublas %d\n", __FILE__, __LINE__, (int)s_); exit(1); } } while (0)

__global__ void smid_kernel(int *out) {
    unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    if (threadIdx.x == 0) out[blockIdx.x] = (int)s;
    /* stay a while so that blocks spread over every SM they may use */
    long long t0 = clock64(); while (clock64() - t0 < 20000) {}
}

/* streaming read: each thread 4 independent 16-byte loads a round, evict-first; one word per block out */
__global__ void read_kernel(const uint4 *__restrict__ p, size_t n, unsigned *out) {
    unsigned acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; u++) v[u] = i + u * stride < n ? __ldcs(p + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (acc == 0x12345678u) out[blockIdx.x] = acc;
}

struct green { CUgreenCtx g; cudaStream_t s; int sms; };
static green make_green(CUdevResource *r) {
    CUdevResourceDesc d; DRV(cuDevResourceGenerateDesc(&d, r, 1));
    green G; DRV(cuGreenCtxCreate(&G.g, d, 0, CU_GREEN_CTX_DEFAULT_STREAM));
    CUstream s; DRV(cuGreenCtxStreamCreate(&s, G.g, CU_STREAM_NON_BLOCKING, 0));
    G.s = (cudaStream_t)s; G.sms = (int)r->sm.smCount;
    return G;
}

struct gemm { cublasLtMatmulDesc_t desc; cublasLtMatrixLayout_t la, lb, ld; cublasLtMatmulAlgo_t algo; __half *W, *X, *D; };
static cublasLtHandle_t lt;
static void *ws[2]; static const size_t wss = 32 << 20;
static gemm make_gemm(int M, int N, int K, __half *X, __half *D) {
    gemm g; g.X = X; g.D = D;
    CU(cudaMalloc(&g.W, (size_t)N * K * 2)); CU(cudaMemset(g.W, 0, (size_t)N * K * 2));
    LT(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    LT(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_16F, K, N, K)); LT(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_16F, K, M, K));
    LT(cublasLtMatrixLayoutCreate(&g.ld, CUDA_R_16F, N, M, N));
    cublasLtMatmulPreference_t pref; LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wss, sizeof wss));
    cublasLtMatmulHeuristicResult_t hr[1]; int got = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt, g.desc, g.la, g.lb, g.ld, g.ld, pref, 1, hr, &got));
    if (!got) { printf("no algo\n"); exit(1); }
    g.algo = hr[0].algo;
    return g;
}
static void run_gemm(const gemm &g, cudaStream_t s, int w) {
    const float one = 1.f, zero = 0.f;
    LT(cublasLtMatmul(lt, g.desc, &one, g.W, g.la, g.X, g.lb, &zero, g.D, g.ld, g.D, g.ld, &g.algo, ws[w], wss, s));
}

static float ms_between(cudaEvent_t a, cudaEvent_t b) { float ms; CU(cudaEventElapsedTime(&ms, a, b)); return ms; }

int main(int argc, char **argv) {
    const int att_sms = argc > 1 ? atoi(argv[1]) : 64;
    CU(cudaSetDevice(0)); CU(cudaFree(0));
    cudaDeviceProp pr; CU(cudaGetDeviceProperties(&pr, 0));
    printf("%s, %d SMs\n", pr.name, pr.multiProcessorCount);
    CUdevResource all; DRV(cuDeviceGetDevResource(0, &all, CU_DEV_RESOURCE_TYPE_SM));
    printf("SM resource: %u SMs, min partition %u, alignment %u\n", all.sm.smCount, all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment);

    /* (2) bandwidth of the streaming read on N SMs */
    const size_t bytes = (size_t)3 << 30, n = bytes / 16;
    uint4 *buf; CU(cudaMalloc(&buf, bytes)); CU(cudaMemset(buf, 1, bytes));
    unsigned *sink; CU(cudaMalloc(&sink, 1 << 24));
    int *ids; CU(cudaMalloc(&ids, 4 << 20));
    cudaEvent_t e[8]; for (auto &x : e) CU(cudaEventCreate(&x));
    std::vector<int> counts = {132, att_sms, 128, 112, 96, 80, 64, 48, 32};
    for (int want : counts) {
        green G; bool plain = want >= (int)all.sm.smCount;
        CUdevResource part, rest; unsigned ng = 1;
        if (!plain) { DRV(cuDevSmResourceSplitByCount(&part, &ng, &all, &rest, 0, (unsigned)want)); G = make_green(&part); }
        else { G.s = 0; G.sms = pr.multiProcessorCount; CU(cudaStreamCreateWithFlags(&G.s, cudaStreamNonBlocking)); }
        for (int blocks_per_sm : {4, 64}) {
            const int grid = G.sms * blocks_per_sm;
            for (int w = 0; w < 2; w++) read_kernel<<<grid, 256, 0, G.s>>>(buf, n, sink);
            CU(cudaEventRecord(e[0], G.s));
            for (int r = 0; r < 5; r++) read_kernel<<<grid, 256, 0, G.s>>>(buf, n, sink);
            CU(cudaEventRecord(e[1], G.s)); CU(cudaEventSynchronize(e[1])); CU(cudaGetLastError());
            printf("read 3 GiB on %3d SMs (%s), %2d blocks/SM: %.3f ms, %.2f TB/s\n", G.sms, plain ? "whole GPU" : "green",
                   blocks_per_sm, ms_between(e[0], e[1]) / 5, 5.0 * bytes / (ms_between(e[0], e[1]) * 1e9));
        }
        if (!plain) { CU(cudaStreamDestroy(G.s)); DRV(cuGreenCtxDestroy(G.g)); } else CU(cudaStreamDestroy(G.s));
    }

    /* the split used below: attention set of att_sms, products on the rest */
    CUdevResource ra, rb; unsigned ng = 1;
    DRV(cuDevSmResourceSplitByCount(&ra, &ng, &all, &rb, 0, (unsigned)att_sms));
    green A = make_green(&ra), B = make_green(&rb);
    printf("split: attention set %d SMs, products set %d SMs\n", A.sms, B.sms);

    /* (1) where blocks land, eager and from a graph */
    auto landing = [&](const char *what) {
        std::vector<int> h(4096); CU(cudaMemcpy(h.data(), ids, 4096 * 4, cudaMemcpyDeviceToHost));
        std::set<int> sa(h.begin(), h.begin() + 2048), sb(h.begin() + 2048, h.end()); int both = 0;
        for (int x : sa) both += sb.count(x);
        printf("%s: set A's blocks on %zu SMs, set B's on %zu SMs, %d SMs shared\n", what, sa.size(), sb.size(), both);
    };
    smid_kernel<<<2048, 64, 0, A.s>>>(ids); smid_kernel<<<2048, 64, 0, B.s>>>(ids + 2048);
    CU(cudaDeviceSynchronize()); landing("eager");
    cudaStream_t cap; CU(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
    cudaEvent_t fork, j1, j2; CU(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming)); CU(cudaEventCreateWithFlags(&j1, cudaEventDisableTiming)); CU(cudaEventCreateWithFlags(&j2, cudaEventDisableTiming));
    CU(cudaMemset(ids, 0xff, 4 << 20));
    cudaGraph_t gr; cudaGraphExec_t gx;
    CU(cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal));
    CU(cudaEventRecord(fork, cap)); CU(cudaStreamWaitEvent(A.s, fork, 0)); CU(cudaStreamWaitEvent(B.s, fork, 0));
    smid_kernel<<<2048, 64, 0, A.s>>>(ids); smid_kernel<<<2048, 64, 0, B.s>>>(ids + 2048);
    CU(cudaEventRecord(j1, A.s)); CU(cudaEventRecord(j2, B.s)); CU(cudaStreamWaitEvent(cap, j1, 0)); CU(cudaStreamWaitEvent(cap, j2, 0));
    CU(cudaStreamEndCapture(cap, &gr)); CU(cudaGraphInstantiate(&gx, gr, 0));
    CU(cudaGraphLaunch(gx, cap)); CU(cudaStreamSynchronize(cap)); landing("graph");

    /* (3) one part's products (124M, 512 rows: qkv, proj, fc, fc proj, x 12 layers) beside a 3 GiB read */
    lt = NULL; LT(cublasLtCreate(&lt)); CU(cudaMalloc(&ws[0], wss)); CU(cudaMalloc(&ws[1], wss));
    __half *X, *D; CU(cudaMalloc(&X, (size_t)512 * 3072 * 2)); CU(cudaMalloc(&D, (size_t)512 * 3072 * 2));
    CU(cudaMemset(X, 0, (size_t)512 * 3072 * 2));
    gemm gs[4] = {make_gemm(512, 2304, 768, X, D), make_gemm(512, 768, 768, X, D), make_gemm(512, 3072, 768, X, D), make_gemm(512, 768, 3072, X, D)};
    auto products = [&](cudaStream_t s) { for (int l = 0; l < 12; l++) for (auto &g : gs) run_gemm(g, s, 1); };
    auto reads = [&](cudaStream_t s, int sms) { read_kernel<<<sms * 64, 256, 0, s>>>(buf, n, sink); };
    cudaStream_t full; CU(cudaStreamCreateWithFlags(&full, cudaStreamNonBlocking));
    auto timed = [&](const char *what, auto f, cudaStream_t s) {
        f(); CU(cudaStreamSynchronize(s));
        CU(cudaEventRecord(e[0], s)); for (int r = 0; r < 5; r++) f(); CU(cudaEventRecord(e[1], s)); CU(cudaEventSynchronize(e[1]));
        CU(cudaGetLastError());
        printf("%-58s %.3f ms\n", what, ms_between(e[0], e[1]) / 5);
    };
    timed("products alone, whole GPU", [&] { products(full); }, full);
    timed("products alone, products set", [&] { products(B.s); }, B.s);
    timed("read alone, whole GPU", [&] { reads(full, pr.multiProcessorCount); }, full);
    timed("read alone, attention set", [&] { reads(A.s, A.sms); }, A.s);
    auto both = [&](cudaStream_t sa, int sms, cudaStream_t sb) {
        CU(cudaEventRecord(fork, cap)); CU(cudaStreamWaitEvent(sa, fork, 0)); CU(cudaStreamWaitEvent(sb, fork, 0));
        reads(sa, sms); products(sb);
        CU(cudaEventRecord(j1, sa)); CU(cudaEventRecord(j2, sb)); CU(cudaStreamWaitEvent(cap, j1, 0)); CU(cudaStreamWaitEvent(cap, j2, 0));
    };
    cudaStream_t full2; CU(cudaStreamCreateWithFlags(&full2, cudaStreamNonBlocking));
    timed("read + products at once, two plain streams", [&] { both(full, pr.multiProcessorCount, full2); }, cap);
    timed("read + products at once, split sets (eager)", [&] { both(A.s, A.sms, B.s); }, cap);
    cudaGraph_t g2; cudaGraphExec_t gx2;
    CU(cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal)); both(A.s, A.sms, B.s);
    CU(cudaStreamEndCapture(cap, &g2)); CU(cudaGraphInstantiate(&gx2, g2, 0));
    timed("read + products at once, split sets (graph)", [&] { CU(cudaGraphLaunch(gx2, cap)); }, cap);
    cudaGraph_t g3; cudaGraphExec_t gx3;
    CU(cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal)); both(full, pr.multiProcessorCount, full2);
    CU(cudaStreamEndCapture(cap, &g3)); CU(cudaGraphInstantiate(&gx3, g3, 0));
    timed("read + products at once, two plain streams (graph)", [&] { CU(cudaGraphLaunch(gx3, cap)); }, cap);
    printf("done\n");
    return 0;
}
