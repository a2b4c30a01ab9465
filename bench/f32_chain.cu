/* bench/f32_chain.cu: how cuBLASLt's F32 decode class (gpt2__decode_lt, pinned for GPT2_GEMM_REF_ROWS rows) adds K, for
   the decode products of every published GPT-2 width (RESULTS.md item 121). For each product (bias into the output,
   or fp32 K pieces as the projections into the residual run) and 1 and 16 rows, prints the class (algorithm id, its
   split of K and reduction scheme) and the share of outputs equal, bit for bit, to the best of a family of host
   references: each of the class's sk splits of a piece as one fused multiply-add chain over its K in order, the
   splits at multiples of kt = 1..256 (ceil, or even with the extras first or last), added in order, in reverse, or
   from zero; + bias (the first 512 columns of each row). A class that does not split K matches a single chain exactly (1.0000); what gpt2__skinny32_kernel
   computes. Usage: bench/f32_chain (on a GPU). */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
static uint32_t rs = 7654321u;
static float ur(void) { rs = rs * 1664525u + 1013904223u; return (float)(rs >> 8) / 16777216.0f - 0.5f; }
int main(void) {
    gpt2__cuda_state *S = (gpt2__cuda_state *)calloc(1, sizeof *S);
    cudaDeviceProp pr; cudaGetDevice(&S->device); cudaGetDeviceProperties(&pr, S->device);
    S->sms = pr.multiProcessorCount; cudaStreamCreate(&S->stream); cublasLtCreate(&S->lt);
    S->lt_ws_size = (size_t)32 << 20; cudaMalloc(&S->lt_ws, S->lt_ws_size);
    const int shapes[][4] = {{2304, 768, GPT2__EPI_BIAS, 1}, {768, 768, 0, 2}, {3072, 768, GPT2__EPI_BIAS, 1}, {768, 3072, 0, 4},
                             {50304, 768, 0, 1}, {3072, 1024, GPT2__EPI_BIAS, 1}, {1024, 1024, 0, 4}, {4096, 1024, GPT2__EPI_BIAS, 1},
                             {1024, 4096, 0, 4}, {3840, 1280, GPT2__EPI_BIAS, 1}, {1280, 1280, 0, 4}, {5120, 1280, GPT2__EPI_BIAS, 1},
                             {1280, 5120, 0, 4}, {4800, 1600, GPT2__EPI_BIAS, 1}, {1600, 1600, 0, 4}, {6400, 1600, GPT2__EPI_BIAS, 1},
                             {1600, 6400, 0, 4}};
    for (unsigned si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int O = shapes[si][0], I = shapes[si][1], epi = shapes[si][2], sp = shapes[si][3], Ik = I / sp;
        for (int n = 1; n <= 16; n += 15) {
            float *W = (float *)malloc((size_t)O * I * 4), *X = (float *)malloc((size_t)n * I * 4), *b = (float *)malloc((size_t)O * 4);
            for (size_t i = 0; i < (size_t)O * I; i++) W[i] = ur() * 0.2f;
            for (size_t i = 0; i < (size_t)n * I; i++) X[i] = ur() * 4.0f;
            for (int i = 0; i < O; i++) b[i] = ur();
            float *dW, *dX, *db, *dD; const size_t dn = (size_t)sp * n * O;
            cudaMalloc(&dW, (size_t)O * I * 4); cudaMalloc(&dX, (size_t)n * I * 4); cudaMalloc(&db, O * 4); cudaMalloc(&dD, dn * 4);
            cudaMemcpy(dW, W, (size_t)O * I * 4, cudaMemcpyHostToDevice); cudaMemcpy(dX, X, (size_t)n * I * 4, cudaMemcpyHostToDevice);
            cudaMemcpy(db, b, O * 4, cudaMemcpyHostToDevice);
            gpt2__decode_lt<float>(S, dD, dW, dX, epi ? db : NULL, O, n, I, epi, 1, O, sp);
            cudaStreamSynchronize(S->stream);
            float *D = (float *)malloc(dn * 4); cudaMemcpy(D, dD, dn * 4, cudaMemcpyDeviceToHost);
            const gpt2__gemm *g = &S->gemm[S->n_gemm - 1]; int cls[4]; gpt2__algo_class(&g->algo, cls);
            printf("O %5d I %4d %s n %2d: algo %d splitk %d red %d:", O, I, epi ? "bias    " : sp > 1 ? "pieces 4" : "fp32    ", n, cls[0], cls[1], cls[2]);
            const int sk = cls[1] > 1 ? cls[1] : 1;
            double best = 0; int bkt = 0, bmode = 0, border = 0;
            for (int kt = 1; kt <= 256; kt *= 2)
                for (int mode = 0; mode < 3; mode++)
                    for (int order = 0; order < 3; order++) {
                        if (sk == 1 && (kt > 1 || mode || order)) continue; /* one chain: every hypothesis the same */
                        /* split points: T = ceil(I/kt) tiles; mode 0: ceil(T/sk) tiles each (last short); 1: even, extras first; 2: even, extras last */
                        const int T = (Ik + kt - 1) / kt; int bnd[17]; bnd[0] = 0;
                        for (int p = 0; p < sk; p++) {
                            int tiles;
                            if (mode == 0) tiles = (T + sk - 1) / sk;
                            else if (mode == 1) tiles = T / sk + (p < T % sk);
                            else tiles = T / sk + (p >= sk - T % sk);
                            int e = bnd[p] + tiles * kt; if (e > Ik || p == sk - 1) e = Ik; bnd[p + 1] = e;
                        }
                        size_t same = 0, tot = 0;
                        for (int q = 0; q < sp; q++)
                        for (int r = 0; r < n; r++)
                            for (int o = 0; o < (O < 512 ? O : 512); o++) { /* the first 512 columns */
                                float part[16];
                                for (int p = 0; p < sk; p++) {
                                    float a = 0.0f;
                                    for (int k = q * Ik + bnd[p]; k < q * Ik + bnd[p + 1]; k++) a = fmaf(X[(size_t)r * I + k], W[(size_t)o * I + k], a);
                                    part[p] = a;
                                }
                                float v;
                                if (order == 0) { v = part[0]; for (int p = 1; p < sk; p++) v += part[p]; }
                                else if (order == 1) { v = part[sk - 1]; for (int p = sk - 2; p >= 0; p--) v += part[p]; }
                                else { v = 0.0f; for (int p = 0; p < sk; p++) v += part[p]; }
                                if (epi) v = v + b[o];
                                same += D[((size_t)q * n + r) * O + o] == v; tot++;
                            }
                        const double f = (double)same / tot;
                        if (f > best) { best = f; bkt = kt; bmode = mode; border = order; }
                    }
            printf("  best %.4f at kt %d mode %d order %d\n", best, bkt, bmode, border);
            free(W); free(X); free(b); free(D); cudaFree(dW); cudaFree(dX); cudaFree(db); cudaFree(dD);
        }
    }
    return 0;
}
