/* What a persistent whole-step kernel would pay per phase, against what a kernel boundary costs (RESULTS.md item 41).
   1. A grid-wide barrier among G resident blocks of 256 threads: thread 0 of each block adds to one counter (block 0
      adds 2^31 - (G - 1), the others 1, so bit 31 flips exactly when all have arrived and the counter needs no
      reset), then spins on an acquire load until the bit flips. Timed over 2000 barriers, G = SMs and 2 x SMs.
   2. A chain of 500 empty kernels of G blocks in one CUDA graph, each launched with programmatic dependent launch
      (wait, then let the next one launch), as gpt2.cuh's decode step launches its kernels. Timed per kernel.
   3. What a graph boundary adds: graphs of K such kernels (K = 64 and 244, a batch-1 step's count at 124M and 1558M)
      replayed R times back to back with an event recorded after each, as gpt2_generate launches its steps; each
      replay's time minus K kernels at the in-graph rate of 2. (programmatic launch does not cross graph launches).
   Build: nvcc -O3 -gencode arch=compute_90,code=sm_90 bench/barrier_vs_pdl.cu -o bench/barrier_vs_pdl (sm_90+). */
#include <cstdio>
#include <cuda_runtime.h>
#include "grid_barrier.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)

__device__ __forceinline__ void grid_barrier(unsigned *ctr) {
    __syncthreads();
    if (threadIdx.x == 0) grid_arrive_wait(ctr);
    __syncthreads();
}
__global__ void __launch_bounds__(256, 1) barriers(unsigned *ctr, int n, float *sink) {
    float a = (float)threadIdx.x;
    for (int i = 0; i < n; i++) { a = a * 1.0001f + 1.0f; grid_barrier(ctr); }
    if (a == -1.0f) sink[0] = a;
}
__global__ void empty_pdl(float *sink) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
#endif
    if (threadIdx.x == 9999) sink[0] = 1.0f;
}

/* a graph of n empty kernels of G blocks, each launched with programmatic dependent launch, instantiated in *ge */
static int pdl_chain(cudaStream_t s, int G, int n, float *sink, cudaGraph_t *g, cudaGraphExec_t *ge) {
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; i++) {
        cudaLaunchConfig_t c = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        c.gridDim = G; c.blockDim = 256; c.stream = s; c.attrs = at; c.numAttrs = 1;
        CK(cudaLaunchKernelEx(&c, empty_pdl, sink));
    }
    CK(cudaStreamEndCapture(s, g));
    CK(cudaGraphInstantiate(ge, *g, 0));
    return 0;
}

int main(void) {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    unsigned *ctr;
    float *sink;
    CK(cudaMalloc(&ctr, 4)); CK(cudaMemset(ctr, 0, 4)); CK(cudaMalloc(&sink, 4));
    cudaStream_t s;
    cudaEvent_t e0, e1;
    CK(cudaStreamCreate(&s)); CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    float ms;
    for (int G : {sms, 2 * sms}) {
        const int n = 2000;
        barriers<<<G, 256, 0, s>>>(ctr, 10, sink);
        CK(cudaStreamSynchronize(s));
        CK(cudaEventRecord(e0, s));
        barriers<<<G, 256, 0, s>>>(ctr, n, sink);
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        printf("grid barrier, %d blocks: %.3f us each\n", G, ms * 1000.0f / n);
    }
    for (int G : {sms, 4 * sms}) {
        const int n = 500;
        cudaGraph_t g;
        cudaGraphExec_t ge;
        if (pdl_chain(s, G, n, sink, &g, &ge)) return 1;
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        const float per = ms * 1000.0f / n;
        printf("empty kernels with PDL in a graph, %d blocks: %.3f us each\n", G, per);
        cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
        if (G != sms) continue;
        for (int K : {64, 244}) {
            const int R = 400;
            if (pdl_chain(s, G, K, sink, &g, &ge)) return 1;
            cudaEvent_t ev;
            CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
            for (int w = 0; w < 20; w++) CK(cudaGraphLaunch(ge, s));
            CK(cudaStreamSynchronize(s));
            CK(cudaEventRecord(e0, s));
            for (int r = 0; r < R; r++) { CK(cudaGraphLaunch(ge, s)); CK(cudaEventRecord(ev, s)); }
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&ms, e0, e1));
            const float rep = ms * 1000.0f / R;
            printf("graphs of %d such kernels replayed back to back: %.2f us a replay, %.2f us over %d in-graph kernels\n",
                   K, rep, rep - K * per, K);
            cudaEventDestroy(ev); cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
        }
    }
    return 0;
}
