/* attn_decode — decode attention's kernels side by side on one layer's worth of rows (RESULTS.md item 66):
   gpt2__attn_kernel (the CUDA-core kernel), gpt2__attn_mma_kernel (tensor cores, few rows) and
   gpt2__attn_stream_kernel (tensor cores, many rows), in F16 with head size 64 and 12 heads (124M's attention),
   random K/V cache and qkv. For each case: the time of one launch (median of 15 timings of 10 back-to-back launches,
   CUDA events), the K/V read rate, the largest difference from gpt2__attn_kernel, and whether the two tensor-core
   kernels give the same bits (they must: gpt2.cuh picks between them by the step's row count).
   Usage: bench/attn_decode   (needs a GPU of sm_80 or later) */
#define GPT2_IMPLEMENTATION
#include "gpt2.cuh"
#include <algorithm>
#include <random>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)
typedef __half T;

int main(void) {
    const int H = 12, C = 768, HD = 64, split_len = 256;
    const float sl2 = 1.4426950408889634f / 8.0f;
    /* rows, cache length per slot, position (-1: random below the length), staged (few rows: K/V into shared memory) */
    struct { int N, max_seq, pos, stg; const char *name; } cases[] = {
        {1024, 256, 160, 0, "1024 rows at 160"}, {1024, 256, -1, 0, "1024 rows, random < 256"},
        {256, 1024, -1, 0, "256 rows, random < 1024 (splits)"}, {256, 256, 160, 0, "256 rows at 160"},
        {1, 256, 191, 1, "1 row at 191, staged"}, {1, 1024, 700, 1, "1 row at 700, staged (splits)"}};
    int optin = 0;
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    const size_t ring = GPT2__AMMA_WB * ((8 * 64 + 16) * sizeof(float) + (size_t)GPT2__AMMA_NS * 2 * 32 * 64 * sizeof(T));
    CK(cudaFuncSetAttribute(gpt2__attn_kernel<T, 8, 1, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 1024));
    CK(cudaFuncSetAttribute(gpt2__attn_mma_kernel<T, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 1024));
    CK(cudaFuncSetAttribute(gpt2__attn_stream_kernel<T, GPT2__AMMA_NS, GPT2__AMMA_WB, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ring));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (const auto &cs : cases) {
        const int N = cs.N, S = cs.max_seq, n_split = (S + split_len - 1) / split_len, n_items = N * H * n_split;
        const size_t kvn = (size_t)N * H * S * HD;
        std::mt19937 rng(1);
        std::normal_distribution<float> nd(0.f, 1.f);
        std::vector<T> hk(kvn), hv(kvn), hq((size_t)N * 3 * C);
        for (auto &x : hk) x = __float2half(nd(rng));
        for (auto &x : hv) x = __float2half(nd(rng));
        for (auto &x : hq) x = __float2half(nd(rng));
        std::vector<int> rows(N), pos(N);
        for (int i = 0; i < N; i++) { rows[i] = i; pos[i] = cs.pos >= 0 ? cs.pos : (int)(rng() % S); }
        T *kc, *vc, *qkv, *out;
        float *part;
        unsigned *cnt;
        int *drows, *dpos;
        CK(cudaMalloc(&kc, kvn * 2)); CK(cudaMalloc(&vc, kvn * 2)); CK(cudaMalloc(&qkv, hq.size() * 2));
        CK(cudaMalloc(&out, (size_t)N * C * 2)); CK(cudaMalloc(&part, (size_t)N * H * n_split * (HD + 2) * 4));
        CK(cudaMalloc(&cnt, (size_t)N * H * 4)); CK(cudaMemset(cnt, 0, (size_t)N * H * 4));
        CK(cudaMalloc(&drows, N * 4)); CK(cudaMalloc(&dpos, N * 4));
        CK(cudaMemcpy(kc, hk.data(), kvn * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(vc, hv.data(), kvn * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(qkv, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(drows, rows.data(), N * 4, cudaMemcpyHostToDevice)); /* slot = row */
        CK(cudaMemcpy(dpos, pos.data(), N * 4, cudaMemcpyHostToDevice));
        const dim3 grid(n_split, H, N);
        const size_t stage = 2 * (size_t)split_len * HD * sizeof(T);
        const size_t s_old = (16 * HD + 32) * 4 + (cs.stg ? stage : 0), s_mma = 8 * 66 * 4 + (cs.stg ? stage : 0);
        const int pf = cs.stg;
        auto launch = [&](int k) {
            if (k == 0 && cs.stg) gpt2__attn_kernel<T, 8, 1, true><<<grid, 128, s_old>>>(qkv, kc, vc, out, part, drows, drows, dpos, C, H, HD, S, split_len, n_split, 8, sl2, cnt, 1, pf);
            if (k == 0 && !cs.stg) gpt2__attn_kernel<T, 8, 1, false><<<grid, 128, s_old>>>(qkv, kc, vc, out, part, drows, drows, dpos, C, H, HD, S, split_len, n_split, 8, sl2, cnt, 1, pf);
            if (k == 1 && cs.stg) gpt2__attn_mma_kernel<T, true><<<grid, 256, s_mma>>>(qkv, kc, vc, out, part, drows, drows, dpos, C, H, S, split_len, n_split, sl2, cnt, 1, pf, 0);
            if (k == 1 && !cs.stg) gpt2__attn_mma_kernel<T, false><<<grid, 256, s_mma>>>(qkv, kc, vc, out, part, drows, drows, dpos, C, H, S, split_len, n_split, sl2, cnt, 1, pf, 0);
            if (k == 2) gpt2__attn_stream_kernel<T, GPT2__AMMA_NS, GPT2__AMMA_WB, false><<<(n_items + GPT2__AMMA_WB - 1) / GPT2__AMMA_WB, 32 * GPT2__AMMA_WB, ring>>>(
                qkv, kc, vc, out, part, drows, drows, dpos, C, H, S, split_len, n_split, n_items, sl2, cnt, 1, gpt2__tmap{}, gpt2__tmap{}, 0);
        };
        double bytes = 0;
        for (int i = 0; i < N; i++) bytes += 2.0 * H * (pos[i] + 1) * HD * sizeof(T);
        std::vector<T> o[3];
        printf("%-34s", cs.name);
        const char *names[3] = {"attn_kernel", "mma", "stream"};
        for (int k = 0; k < 3; k++) {
            CK(cudaMemset(out, 0, (size_t)N * C * 2));
            launch(k);
            CK(cudaDeviceSynchronize());
            o[k].resize((size_t)N * C);
            CK(cudaMemcpy(o[k].data(), out, o[k].size() * 2, cudaMemcpyDeviceToHost));
            std::vector<float> ts;
            for (int rep = 0; rep < 15; rep++) {
                CK(cudaEventRecord(e0));
                for (int it = 0; it < 10; it++) launch(k);
                CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                ts.push_back(ms / 10);
            }
            CK(cudaGetLastError());
            std::sort(ts.begin(), ts.end());
            const float t = ts[ts.size() / 2];
            printf(" | %s %.1f us %.2f TB/s", names[k], t * 1e3, bytes / t / 1e9);
        }
        double md = 0, ma = 0;
        for (size_t i = 0; i < o[0].size(); i++) {
            md = std::max(md, (double)fabsf(__half2float(o[0][i]) - __half2float(o[1][i])));
            ma = std::max(ma, (double)fabsf(__half2float(o[0][i])));
        }
        printf(" | max |mma - attn_kernel| %.1e (max |out| %.2f) | mma and stream %s\n", md, ma,
               memcmp(o[1].data(), o[2].data(), o[1].size() * 2) ? "DIFFER" : "the same bits");
        cudaFree(kc); cudaFree(vc); cudaFree(qkv); cudaFree(out); cudaFree(part); cudaFree(cnt); cudaFree(drows); cudaFree(dpos);
    }
    return 0;
}
