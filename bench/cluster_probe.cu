/* cluster_probe — could ONE thread-block cluster run a whole batch-1 decode step? (RESULTS.md item 175)

   Items 41 and 171 weighed a persistent batch-1 step over all 132 SMs, whose every dependent stage ends in a
   grid-wide barrier (1.36 us) and an L2 round trip for the activations, and found it slower than gpt2.cuh's 64
   kernels chained by programmatic dependent launch. A single cluster of 16 blocks (Hopper's non-portable size,
   one GPC) would sync with the hardware cluster barrier and pass the activations through distributed shared
   memory instead, but only 16 SMs would pull the weights: 248 MB a step at 124M, so the 0.15 ms target needs
   them at ~2.5 TB/s, ~155 GB/s an SM, and the dependent stages at ~1 us. This probe measures both unknowns:

   stream G B S CL [REPS [I [KB]]]
                     G blocks (one a SM, clusters of CL) each copy their contiguous share of a buffer of B MB
                     into shared memory (cp.async.bulk onto transaction barriers, L2 evict-first): I warps (1),
                     each with a ring of S stages of KB (16) KB, whose lane 0 issues S copies ahead and re-issues
                     each stage as it lands. B above L2 (50 MB) reads DRAM; B of a few MB, read REPS times, reads
                     L2. Prints GB/s in all and a block.
   sync CL N         a cluster of CL blocks of 256 threads: N rounds of the hardware cluster barrier alone, then
                     N rounds of a dependent exchange as a decode step's would need: each block writes its share of
                     a 768-float row into its shared memory, cluster barrier, every block reads the whole row from
                     its peers (ld.shared::cluster after mapa), reduces it (a block-wide sum, as a layer norm's),
                     and derives its next share from it. Prints ns a round, from %globaltimer in the kernel.

   ldg G B [REPS [U]] the same shares read by 16-byte loads (1024 threads a block, U = 2, 4 or 8 (default) loads in
                     flight a thread).

   Usage: cluster_probe [stream G B S CL [REPS [I [KB]]] | ldg G B [REPS [U]] | sync CL N]   (no arguments: the default sweep).
   Build: make bench/cluster_probe (sm_90a). Timing: CUDA events, median of 5 launches (stream). */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ unsigned sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void wait_parity(uint64_t *b, unsigned parity) {
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}" ::"r"(sa(b)), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, unsigned bytes, uint64_t *bar, uint64_t policy) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                 ::"r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(bar)), "l"(policy) : "memory");
}

/* grid G (clusters of CL), I warps a block; block b copies bytes [b * share, (b + 1) * share) of buf, reps times:
   warp w's lane 0 copies the block's chunks w, w + I, ... through S stages of its own */
__global__ void stream_kernel(const char *buf, size_t share, int chunk, int S, int reps, int evict_first, unsigned *sink) {
    extern __shared__ __align__(128) char ring[];
    __shared__ uint64_t full[32];
    const int w = threadIdx.x >> 5, I = blockDim.x >> 5;
    if ((threadIdx.x & 31) != 0) return;
    for (int s = 0; s < S; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(&full[w * S + s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    uint64_t policy;
    if (evict_first) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    else asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    const char *base = buf + blockIdx.x * share;
    char *mine = ring + (size_t)w * S * chunk;
    uint64_t *bar = full + w * S;
    const long per = (long)(share / chunk), n = (per * reps - w + I - 1) / I; /* this warp's chunks */
    long issued = 0;
    for (; issued < n && issued < S; issued++)
        bulk_copy(mine + issued * chunk, base + ((w + issued * I) % per) * chunk, chunk, &bar[issued], policy);
    unsigned acc = 0;
    for (long i = 0; i < n; i++) {
        const int s = (int)(i % S);
        wait_parity(&bar[s], (unsigned)((i / S) & 1));
        acc ^= *(volatile unsigned *)(mine + s * chunk);
        if (issued < n) {
            bulk_copy(mine + s * chunk, base + ((w + issued * I) % per) * chunk, chunk, &bar[s], policy);
            issued++;
        }
    }
    if (acc == 0x9e3779b9u) *sink = acc;
}

static int run_stream(int G, double mb, int S, int CL, int reps, int I = 1, int chunk = 16384) {
    const size_t share = ((size_t)(mb * 1048576.0) / G) / chunk * chunk;
    if (share == 0 || S < 1 || I < 1 || I * S > 32 || G % CL || (size_t)I * S * chunk > 200 * 1024 || chunk % 16) {
        printf("stream: bad arguments\n");
        return 1;
    }
    char *buf; unsigned *sink;
    CK(cudaMalloc(&buf, share * G));
    CK(cudaMemset(buf, 0, share * G));
    CK(cudaMalloc(&sink, 4));
    const int smem = I * S * chunk;
    CK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(G); cfg.blockDim = dim3(32 * I); cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CL; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
    cfg.attrs = at; cfg.numAttrs = 1;
    const int ef = reps == 1; /* one pass: stream from DRAM, evict-first; several: keep it in L2 */
    CK(cudaLaunchKernelEx(&cfg, stream_kernel, (const char *)buf, share, chunk, S, reps, ef, sink)); /* warm-up */
    CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(e0));
        CK(cudaLaunchKernelEx(&cfg, stream_kernel, (const char *)buf, share, chunk, S, reps, ef, sink));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    const double bytes = (double)share * G * reps, gbs = bytes / (t[2] * 1e-3) / 1e9;
    printf("stream G %3d CL %2d  %7.1f MB x %3d  %d issuer%s x S %2d x %3d KB  %.3f ms  %7.1f GB/s in all  %6.1f GB/s a block\n", G,
           CL, share * (double)G / 1048576.0, reps, I, I > 1 ? "s" : "", S, chunk / 1024, t[2], gbs, gbs / G);
    CK(cudaFree(buf)); CK(cudaFree(sink));
    return 0;
}

/* grid G of 1024 threads; block b reads its share by 16-byte loads, U in flight a thread (the load path, not TMA) */
template <int U>
__global__ void __launch_bounds__(1024) ldg_kernel(const uint4 *buf, size_t share16, int reps, unsigned *sink) {
    const uint4 *base = buf + blockIdx.x * share16;
    unsigned acc = 0;
    for (int r = 0; r < reps; r++)
        for (size_t i0 = 0; i0 < share16; i0 += (size_t)1024 * U) {
            uint4 v[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const size_t i = i0 + (size_t)u * 1024 + threadIdx.x;
                v[u] = i < share16 ? (reps == 1 ? __ldcs(base + i) : __ldcg(base + i)) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].w;
        }
    if (acc == 0x9e3779b9u) *sink = acc;
}

template <int U>
static int run_ldg(int G, double mb, int reps) {
    const size_t share16 = (size_t)(mb * 1048576.0) / G / 16 / 8192 * 8192;
    uint4 *buf; unsigned *sink;
    CK(cudaMalloc(&buf, share16 * G * 16)); CK(cudaMemset(buf, 0, share16 * G * 16)); CK(cudaMalloc(&sink, 4));
    ldg_kernel<U><<<G, 1024>>>(buf, share16, reps, sink);
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(e0));
        ldg_kernel<U><<<G, 1024>>>(buf, share16, reps, sink);
        CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); CK(cudaGetLastError());
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    const double gbs = (double)share16 * 16 * G * reps / (t[2] * 1e-3) / 1e9;
    printf("ldg    G %3d        %7.1f MB x %3d  1024 threads x %d loads of 16 B  %.3f ms  %7.1f GB/s in all  %6.1f GB/s a block\n", G,
           share16 * 16.0 * G / 1048576.0, reps, U, t[2], gbs, gbs / G);
    CK(cudaFree(buf)); CK(cudaFree(sink));
    return 0;
}

/* ---- the cluster's dependent round: barrier, row from the peers, block reduction ---- */
constexpr int ROW = 768, SYNC_T = 256;

__device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ float ld_peer(const float *local, unsigned rank) {
    unsigned a; float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(sa(local)), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory");
    return v;
}

/* one cluster of CL blocks; out[0] = ns a barrier round, out[1] = ns an exchange round (block 0's view) */
__global__ void __launch_bounds__(SYNC_T) sync_kernel(int N, unsigned long long *out, float *sink) {
    __shared__ float part[2][ROW];
    __shared__ float red[SYNC_T / 32];
    unsigned rank, cl;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(cl));
    const int per = ROW / (int)cl;
    for (int i = threadIdx.x; i < ROW; i += SYNC_T) part[0][i] = part[1][i] = 0.f;
    cluster_sync_all();
    unsigned long long t0, t1, t2;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (int r = 0; r < N; r++) cluster_sync_all();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    float mine = (float)rank;
    for (int r = 0; r < N; r++) {
        float *cur = part[r & 1];
        for (int i = threadIdx.x; i < per; i += SYNC_T) cur[rank * per + i] = mine; /* this block's share of the row */
        cluster_sync_all();
        float s = 0.f;
        for (int i = threadIdx.x; i < ROW; i += SYNC_T) s += ld_peer(&cur[i], (unsigned)(i / per));
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
        __syncthreads();
        float tot = 0.f;
        for (int w = 0; w < SYNC_T / 32; w++) tot += red[w];
        __syncthreads();
        mine = tot * 1e-3f + (float)rank; /* the next share depends on the whole row */
    }
    cluster_sync_all(); /* no block leaves while a peer may still read its shared memory */
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t2));
    if (rank == 0 && threadIdx.x == 0) { out[0] = (t1 - t0) / N; out[1] = (t2 - t1) / N; *sink = mine; }
}

static int run_sync(int CL, int N) {
    unsigned long long *out; float *sink;
    CK(cudaMalloc(&out, 16)); CK(cudaMalloc(&sink, 4));
    CK(cudaFuncSetAttribute(sync_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(CL); cfg.blockDim = dim3(SYNC_T);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CL; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
    cfg.attrs = at; cfg.numAttrs = 1;
    unsigned long long h[2] = {0, 0}, best[2] = {~0ull, ~0ull};
    for (int r = 0; r < 3; r++) {
        CK(cudaLaunchKernelEx(&cfg, sync_kernel, N, out, sink));
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(h, out, 16, cudaMemcpyDeviceToHost));
        best[0] = std::min(best[0], h[0]); best[1] = std::min(best[1], h[1]);
    }
    printf("sync CL %2d  N %d  barrier %llu ns a round  exchange (barrier + %d floats from the peers + block sum) %llu ns a round\n",
           CL, N, best[0], ROW, best[1]);
    CK(cudaFree(out)); CK(cudaFree(sink));
    return 0;
}

int main(int argc, char **argv) {
    int dev; cudaDeviceProp p;
    CK(cudaGetDevice(&dev)); CK(cudaGetDeviceProperties(&p, dev));
    printf("%s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
    if (argc >= 6 && !strcmp(argv[1], "stream"))
        return run_stream(atoi(argv[2]), atof(argv[3]), atoi(argv[4]), atoi(argv[5]), argc > 6 ? atoi(argv[6]) : 1,
                          argc > 7 ? atoi(argv[7]) : 1, argc > 8 ? atoi(argv[8]) * 1024 : 16384);
    if (argc >= 4 && !strcmp(argv[1], "ldg")) {
        const int u = argc > 5 ? atoi(argv[5]) : 8;
        if (u == 2) return run_ldg<2>(atoi(argv[2]), atof(argv[3]), argc > 4 ? atoi(argv[4]) : 1);
        if (u == 4) return run_ldg<4>(atoi(argv[2]), atof(argv[3]), argc > 4 ? atoi(argv[4]) : 1);
        return run_ldg<8>(atoi(argv[2]), atof(argv[3]), argc > 4 ? atoi(argv[4]) : 1);
    }
    if (argc >= 4 && !strcmp(argv[1], "sync")) return run_sync(atoi(argv[2]), atoi(argv[3]));
    if (argc > 1) { printf("usage: cluster_probe [stream G MB S CL [REPS [I [KB]]] | ldg G MB [REPS [U]] | sync CL N]\n"); return 1; }
    const int G = p.multiProcessorCount;
    /* DRAM: 1 GB once; L2: 16 MB, 32 times */
    const int gs[] = {8, 16, 32, 64, G};
    for (int g : gs) run_stream(g, 1024, 12, 1, 1);
    run_stream(16, 1024, 12, 16, 1);
    run_stream(16, 1024, 4, 16, 1);
    run_stream(16, 1024, 8, 16, 1);
    const int is[] = {2, 4, 8};
    for (int i : is) run_stream(16, 1024, 12 / i > 0 ? 12 / i : 1, 16, 1, i);
    run_stream(16, 1024, 3, 16, 1, 1, 65536);
    run_stream(16, 1024, 12, 16, 1, 1, 4096);
    run_stream(1, 256, 3, 1, 1, 4);
    for (int g : gs) run_stream(g, 16, 12, 1, 32);
    run_stream(16, 16, 12, 16, 32);
    for (int g : gs) run_ldg<8>(g, 1024, 1);
    run_ldg<2>(16, 1024, 1);
    run_ldg<4>(16, 1024, 1);
    for (int g : gs) run_ldg<8>(g, 16, 32);
    const int cls[] = {2, 4, 8, 16};
    for (int c : cls) run_sync(c, 20000);
    return 0;
}
