/* read_bw — the read rate decode attention's K/V pattern allows (RESULTS.md item 66): 6 GiB read front to back
   (grid-stride 16-byte loads at 4-32 blocks of 256 threads per SM), and 124M's throughput step's pattern: 1024
   slots x 12 heads, keys 0..P of each [256][64] F16 K and V region, one 128-thread block per (head, slot), read by
   16-byte loads (64 keys of K and V a block per round) or by two TMA bulk copies into shared memory (sm_90).
   Median of 5 (front to back) or 11 timings of 10 launches, CUDA events. Usage: bench/read_bw */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)
static const int H = 12, S = 256, HD = 64;

__global__ void front_to_back(const uint4 *__restrict__ p, size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc; /* never true for the zeros read: keeps the loads */
}

/* block (head, slot): its K and V regions' first (P + 1) * 64 elements, 64 keys of each per round */
__global__ void __launch_bounds__(128) pattern_loads(const uint4 *k, const uint4 *v, int P, unsigned *sink) {
    const size_t at = ((size_t)blockIdx.y * H + blockIdx.x) * S * HD * 2 / 16;
    const int n = (P + 1) * HD * 2 / 16;
    unsigned acc = 0;
    for (int i0 = 0; i0 < n; i0 += 512) {
        uint4 a[4], b[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const int i = i0 + u * 128 + threadIdx.x;
            a[u] = i < n ? k[at + i] : make_uint4(0, 0, 0, 0);
            b[u] = i < n ? v[at + i] : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < 4; u++) acc ^= a[u].x ^ a[u].w ^ b[u].y ^ b[u].z;
    }
    if (acc == 0x9e3779b9u) *sink = acc;
}

/* the same regions by two bulk copies (cp.async.bulk, one mbarrier) into shared memory */
__global__ void __launch_bounds__(128) pattern_bulk(const uint4 *k, const uint4 *v, int P, unsigned *sink) {
#if __CUDA_ARCH__ >= 900
    extern __shared__ uint4 sm[];
    __shared__ uint64_t bar;
    const size_t at = ((size_t)blockIdx.y * H + blockIdx.x) * S * HD * 2 / 16;
    const unsigned bytes = (P + 1) * HD * 2, b = (unsigned)__cvta_generic_to_shared(&bar);
    if (threadIdx.x == 0) {
        const unsigned d0 = (unsigned)__cvta_generic_to_shared(sm), d1 = (unsigned)__cvta_generic_to_shared(sm + bytes / 16);
        asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
        asm volatile("fence.mbarrier_init.release.cluster;");
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(b), "r"(2 * bytes));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d0), "l"(k + at), "r"(bytes), "r"(b) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(d1), "l"(v + at), "r"(bytes), "r"(b) : "memory");
    }
    __syncthreads();
    unsigned done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(b) : "memory");
    unsigned acc = 0;
    for (int i = threadIdx.x; i < 2 * (int)bytes / 16; i += blockDim.x) acc ^= sm[i].x;
    if (acc == 0x9e3779b9u) *sink = acc;
#endif
}

int main(void) {
    const size_t big = 6ull << 30;
    void *p;
    unsigned *sink;
    int sms = 0;
    CK(cudaMalloc(&p, big)); CK(cudaMalloc(&sink, 4)); CK(cudaMemset(p, 0, big));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    auto median = [&](int reps, int per, auto fn) {
        std::vector<float> ts;
        for (int r = 0; r < reps; r++) {
            cudaEventRecord(e0);
            for (int i = 0; i < per; i++) fn();
            cudaEventRecord(e1); cudaEventSynchronize(e1);
            float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms / per);
        }
        std::sort(ts.begin(), ts.end());
        return ts[ts.size() / 2];
    };
    for (int bpsm : {4, 8, 16, 32}) {
        const float ms = median(5, 1, [&] { front_to_back<<<sms * bpsm, 256>>>((const uint4 *)p, big / 16, sink); });
        CK(cudaGetLastError());
        printf("front to back, %2d blocks/SM: %.3f ms, %.3f TB/s\n", bpsm, ms, big / ms / 1e9);
    }
    const float ms = median(5, 1, [&] { cudaMemcpyAsync((char *)p + big / 2, p, big / 2, cudaMemcpyDeviceToDevice); });
    printf("cudaMemcpy device to device: %.3f TB/s (read + write)\n", big / ms / 1e9);
    const int N = 1024;
    const size_t region = (size_t)N * H * S * HD * 2;
    const uint4 *k = (const uint4 *)p, *v = (const uint4 *)((char *)p + region);
    int optin = 0;
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    CK(cudaFuncSetAttribute(pattern_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 1024));
    for (int P : {160, 255}) {
        const double bytes = 2.0 * N * H * (P + 1) * HD * 2;
        const float a = median(11, 10, [&] { pattern_loads<<<dim3(H, N), 128>>>(k, v, P, sink); });
        const float b = median(11, 10, [&] { pattern_bulk<<<dim3(H, N), 128, 2 * (P + 1) * HD * 2>>>(k, v, P, sink); });
        CK(cudaGetLastError());
        printf("124M step's K/V at position %d: 16-byte loads %.1f us, %.3f TB/s; bulk copies %.1f us, %.3f TB/s\n", P, a * 1e3,
               bytes / a / 1e9, b * 1e3, bytes / b / 1e9);
    }
    return 0;
}
