/* mma_swap — does an m16n8k16 MMA give the same bits with its two operands' roles swapped? (RESULTS.md item 160)
   Decode attention multiplies one query row: today as row 0 of the A operand (15 rows of zeros; gpt2__amma_chunk).
   With the keys as A's 16 rows and the query as column 0 of B (7 columns of zeros) a chunk of 32 keys would take
   half the MMAs. That form may keep the kernels' bits only if every output element is the same sum either way:
   - scores, 64 dims in 4 chained k16 steps: S_A[key] = D[0][key] with A = q (row 0), B = K^T; S_B[key] = D[key][0]
     with A = K, B = q (column 0);
   - P V, 32 keys in 2 chained k16 steps: O_A[d] = D[0][d] with A = P (row 0), B = V; O_B[d] = D[d][0] with A = V^T,
     B = P (column 0).
   Each warp of each block runs TRIALS random problems (values with exponents spread over 2^-8..2^8, signs mixed,
   half of the P problems with a probability-like P in [0, 1]), F16 and BF16, and counts the outputs whose fp32 bits
   differ between the two forms. Usage: bench/mma_swap */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh" /* gpt2__mma */

#include <cstdint>
#include <cstdio>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)
static const int TRIALS = 64;

static __device__ uint32_t rnd(uint64_t &s) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    return (uint32_t)(s >> 32);
}
static __device__ float val(uint64_t &s, bool prob) {
    const uint32_t r = rnd(s);
    const float m = 1.0f + (r & 0xFFFF) / 65536.0f;
    if (prob) return (r >> 16) % 4 == 0 ? 0.0f : m * 0.5f * exp2f(-(float)((r >> 18) % 12));
    return ((r >> 16) & 1 ? -m : m) * exp2f((float)((int)((r >> 17) % 17) - 8));
}
template <typename T> static __device__ uint32_t pack(T lo, T hi) {
    uint32_t v;
    const uint16_t a = *(const uint16_t *)&lo, b = *(const uint16_t *)&hi;
    v = (uint32_t)a | ((uint32_t)b << 16);
    return v;
}
/* D (16x8 fp32, fragment) += A (16x16, row-major in shared memory) x B (16x8, B[k][n] in shared memory) */
template <typename T> static __device__ void mma_tile(float *d, const T *A, const T *B) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    uint32_t a[4];
    a[0] = pack(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
    a[1] = pack(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
    a[2] = pack(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
    a[3] = pack(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
    const uint32_t b0 = pack(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    const uint32_t b1 = pack(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    gpt2__mma(d, a, b0, b1, T());
}
/* fragment -> D[16][8] in shared memory */
static __device__ void store_d(float *D, const float *d) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    D[g * 8 + 2 * t] = d[0]; D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2]; D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

/* one warp a block slice; counts[0..3]: score outputs compared, differing; P V outputs compared, differing */
template <typename T> __global__ void swap_kernel(unsigned long long *counts, uint64_t seed) {
    __shared__ T q[64], K[32][64], P[32], V[32][64], A[16 * 16], B[16 * 8];
    __shared__ float D[16 * 8], SA[32], SB[32], OA[64], OB[64];
    const int lane = threadIdx.x;
    uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * (blockIdx.x * 32 + lane + 1));
    unsigned long long n_s = 0, bad_s = 0, n_o = 0, bad_o = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        const bool prob = trial & 1;
        for (int i = lane; i < 64; i += 32) q[i] = (T)val(s, false);
        for (int i = lane; i < 32 * 64; i += 32) { K[i / 64][i % 64] = (T)val(s, false); V[i / 64][i % 64] = (T)val(s, false); }
        if (lane < 32) P[lane] = (T)val(s, prob);
        __syncwarp();
        /* scores, form A: 4 n-tiles of 8 keys, 4 k-steps over the dims */
        for (int j = 0; j < 4; j++) {
            float d[4] = {0, 0, 0, 0};
            for (int ks = 0; ks < 4; ks++) {
                for (int i = lane; i < 256; i += 32) A[i] = i < 16 ? q[16 * ks + i] : (T)0.0f;
                for (int i = lane; i < 128; i += 32) B[i] = K[8 * j + i % 8][16 * ks + i / 8];
                __syncwarp();
                mma_tile(d, A, B);
                __syncwarp();
            }
            store_d(D, d);
            __syncwarp();
            if (lane < 8) SA[8 * j + lane] = D[lane];
            __syncwarp();
        }
        /* scores, form B: 2 m-tiles of 16 keys */
        for (int i2 = 0; i2 < 2; i2++) {
            float d[4] = {0, 0, 0, 0};
            for (int ks = 0; ks < 4; ks++) {
                for (int i = lane; i < 256; i += 32) A[i] = K[16 * i2 + i / 16][16 * ks + i % 16];
                for (int i = lane; i < 128; i += 32) B[i] = i % 8 == 0 ? q[16 * ks + i / 8] : (T)0.0f;
                __syncwarp();
                mma_tile(d, A, B);
                __syncwarp();
            }
            store_d(D, d);
            __syncwarp();
            if (lane < 16) SB[16 * i2 + lane] = D[lane * 8];
            __syncwarp();
        }
        n_s += 1;
        if (lane < 32 && __float_as_uint(SA[lane]) != __float_as_uint(SB[lane])) bad_s++;
        /* P V, form A: 8 n-tiles of 8 dims, 2 k-steps over the keys */
        for (int j = 0; j < 8; j++) {
            float d[4] = {0, 0, 0, 0};
            for (int ks = 0; ks < 2; ks++) {
                for (int i = lane; i < 256; i += 32) A[i] = i < 16 ? P[16 * ks + i] : (T)0.0f;
                for (int i = lane; i < 128; i += 32) B[i] = V[16 * ks + i / 8][8 * j + i % 8];
                __syncwarp();
                mma_tile(d, A, B);
                __syncwarp();
            }
            store_d(D, d);
            __syncwarp();
            if (lane < 8) OA[8 * j + lane] = D[lane];
            __syncwarp();
        }
        /* P V, form B: 4 m-tiles of 16 dims */
        for (int i2 = 0; i2 < 4; i2++) {
            float d[4] = {0, 0, 0, 0};
            for (int ks = 0; ks < 2; ks++) {
                for (int i = lane; i < 256; i += 32) A[i] = V[16 * ks + i % 16][16 * i2 + i / 16];
                for (int i = lane; i < 128; i += 32) B[i] = i % 8 == 0 ? P[16 * ks + i / 8] : (T)0.0f;
                __syncwarp();
                mma_tile(d, A, B);
                __syncwarp();
            }
            store_d(D, d);
            __syncwarp();
            if (lane < 16) OB[16 * i2 + lane] = D[lane * 8];
            __syncwarp();
        }
        n_o += 2;
        for (int e = 0; e < 2; e++)
            if (__float_as_uint(OA[lane + 32 * e]) != __float_as_uint(OB[lane + 32 * e])) bad_o++;
        __syncwarp();
    }
    atomicAdd(&counts[0], n_s); atomicAdd(&counts[1], bad_s); atomicAdd(&counts[2], n_o); atomicAdd(&counts[3], bad_o);
}

template <typename T> static int run(const char *name) {
    unsigned long long *c, h[4];
    CK(cudaMalloc(&c, sizeof h));
    CK(cudaMemset(c, 0, sizeof h));
    swap_kernel<T><<<2048, 32>>>(c, 12345);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h, c, sizeof h, cudaMemcpyDeviceToHost));
    CK(cudaFree(c));
    printf("%s: scores %llu of %llu differ between q-as-A and q-as-B; P V %llu of %llu differ\n", name, h[1], h[0], h[3], h[2]);
    return h[1] || h[3] ? 2 : 0;
}

int main(void) {
    int r = run<__half>("F16");
    int r2 = run<__nv_bfloat16>("BF16");
    return r ? r : r2;
}
