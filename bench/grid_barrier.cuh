/* The grid-wide barrier of bench/barrier_vs_pdl.cu and bench/persist_step.cu (RESULTS.md items 41 and 171), thread 0
   of each block's part: block 0 adds 2^31 - (G - 1) to one counter, the others 1, so bit 31 flips exactly when all
   G blocks have arrived and the counter needs no reset; then an acquire spin until it flips. The caller syncs its
   block (or the warps that take part) before and after. */
#pragma once

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void grid_arrive_wait(unsigned *ctr) {
    const unsigned add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
    __threadfence();
    const unsigned old = atomicAdd(ctr, add);
    while (((old ^ ld_acquire(ctr)) & 0x80000000u) == 0) {}
    __threadfence();
}
