/* pageable_race — does a kernel on a non-blocking stream see the bytes of a plain cudaMemcpy from pageable memory
   that returned before it was launched? (RESULTS.md item 127: gpt2__skinny_check uploaded its rows so, then ran
   both sides of its comparison on the model's non-blocking stream.)

   The CUDA runtime documents that such a cudaMemcpy "will return once the pageable buffer has been copied to the
   staging memory for DMA transfer to device memory, but the DMA to final destination may not have completed", and a
   stream made with cudaStreamNonBlocking does not wait for the legacy stream the copy runs on. Each trial writes a
   fresh pattern into a pageable host buffer, uploads it (way 0: cudaMemcpy on the legacy stream; way 1:
   cudaMemcpyAsync on the non-blocking stream), launches at once on the non-blocking stream a kernel that counts
   the words that differ from the pattern, and reads the count back. Way 1 must count 0 always; way 0 counts what
   the race lets through on this machine.

   Build: nvcc -O2 -o bench/pageable_race bench/pageable_race.cu   Run: bench/pageable_race [TRIALS] [BYTES...] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

/* grid-stride over n words: bad += words != seed * 2654435761 + i */
__global__ void count_bad(const uint32_t *p, size_t n, uint32_t seed, unsigned long long *bad) {
    unsigned long long b = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        b += p[i] != seed * 2654435761u + (uint32_t)i;
    if (b) atomicAdd(bad, b);
}

int main(int argc, char **argv) {
    const int trials = argc > 1 ? atoi(argv[1]) : 500;
    size_t sizes[16] = {(size_t)1 << 16, (size_t)410 << 10, (size_t)4 << 20};
    int ns = 3;
    if (argc > 2) { ns = 0; for (int a = 2; a < argc && ns < 16; a++) sizes[ns++] = (size_t)atoll(argv[a]); }
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    unsigned long long *bad, *hbad;
    CK(cudaMalloc(&bad, sizeof *bad));
    CK(cudaMallocHost(&hbad, sizeof *hbad));
    for (int si = 0; si < ns; si++) {
        const size_t bytes = sizes[si] & ~(size_t)3, n = bytes / 4;
        uint32_t *h = (uint32_t *)malloc(bytes), *d;
        CK(cudaMalloc(&d, bytes));
        for (int way = 0; way < 2; way++) {
            long long hit = 0, words = 0;
            for (int t = 0; t < trials; t++) {
                const uint32_t seed = (uint32_t)(t * 2 + way + 1);
                CK(cudaMemsetAsync(d, 0xab, bytes, st));
                CK(cudaMemsetAsync(bad, 0, sizeof *bad, st));
                CK(cudaStreamSynchronize(st));
                for (size_t i = 0; i < n; i++) h[i] = seed * 2654435761u + (uint32_t)i;
                if (way == 0) CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
                else CK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, st));
                count_bad<<<264, 256, 0, st>>>(d, n, seed, bad);
                CK(cudaGetLastError());
                CK(cudaMemcpyAsync(hbad, bad, sizeof *bad, cudaMemcpyDeviceToHost, st));
                CK(cudaStreamSynchronize(st));
                CK(cudaDeviceSynchronize());
                hit += *hbad != 0;
                words += (long long)*hbad;
            }
            printf("pageable_race %8zu bytes, %-45s: %4lld of %d trials saw stale words (%lld words in all)\n", bytes,
                   way ? "cudaMemcpyAsync on the kernel's stream" : "cudaMemcpy (legacy stream), kernel non-blocking", hit,
                   trials, words);
        }
        free(h);
        CK(cudaFree(d));
    }
    return 0;
}
