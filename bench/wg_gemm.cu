/* bench/wg_gemm — can a prompt-row product of our own (TMA + wgmma, warp-specialized, persistent) run as fast as
   cuBLASLt's pick on the prefill shapes? The question behind it: its epilogue could then take over the residual +
   layer norm pass that follows the two products into the residual (RESULTS.md item 174).

   Prompt rows have a product class of their own (gpt2__linear: the algorithm picked for a full prompt step), so a
   kernel of ours only has to be deterministic and compute a row alike at any row count. Here: the plain product
   D [M][N] = X [M][K] W [N][K]^T + bias in fp16, beside cuBLASLt's heuristic pick with the bias epilogue on the same
   operands (random, fixed seeds).

   wg_gemm<BN, ST, CL, TE> ("coop"): one block of 3 warpgroups per SM, persistent over 128 x BN tiles (m-major over the
   n tiles of a row block). Warpgroup 0 is the producer: one thread copies X's 128 x 64 and W's BN x 64 boxes by TMA
   (128-byte swizzle) into a ring of ST stages on transaction barriers; with CL = 2, two blocks of a cluster (adjacent
   row blocks) each copy half of W's box and multicast it to both. Warpgroups 1 and 2 own 64 rows each of the tile:
   wgmma m64nBNk16 with both operands from shared memory, four a stage, one group kept in flight, a stage handed back
   once its group is done. Every output is an fp32 chain over K in order, 16 at a time, from 0, then + bias, rounded:
   a row computes alike in any M (and, measured, gives every bit cuBLASLt's pick gives on these shapes). Epilogue TE:
   0 stores from registers; 1 a swizzled staging tile in shared memory by both warpgroups, then TMA stores; 2 each
   warpgroup its own staging by stmatrix and its own TMA stores; 3 8-byte stores from registers (lane pairs swap
   halves). wg_pp<ST, CL> ("ping-pong"): each consumer warpgroup owns whole 128 x 128 tiles, the two taking turns, so
   one's epilogue runs beside the other's products.

   Prints per shape: µs (best of 5 replays of 20 launches in a CUDA graph), TFLOP/s, the ratio to cuBLASLt, and against
   cuBLASLt's output the largest |difference| / (1 + |value|) and the share of outputs bit-identical.
   Usage: [WG_VARIANTS=letters] [WG_PROF=1: one launch each, for ncu] wg_gemm [M N K]...   (no arguments: the 124M and
   1558M prompt shapes at 16,384 and 4,096 rows and the 1558M decode shapes at 256 rows).

   The second question, the product into the residual with the residual add and the next layer norm in its epilogue
   (C 768, 124M's proj and MLP second), against cuBLASLt's product followed by resid_ln:
   [WG_XT=0|1|2|4] [WG_SKIP=bits] wg_gemm ln M K [M K]...   WG_XT: 0 wg_ln, x read from L2; 1 wg_ln, x by TMA;
   2 wg_lnp (ping-pong, 64-row tiles a warpgroup); 4 wg_lne (an epilogue warpgroup). WG_SKIP (timing only, wg_ln):
   1 no exchanges, 2 no x stores, 4 no y stores. Prints both outputs' differences (x fp32, y T) and the times.
   Build: make bench/wg_gemm (sm_90a only). */
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <functional>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cuda.h>
#include <cublasLt.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define LT(x) do { cublasStatus_t s_ = (x); if (s_) { printf("%s:%d: cublas %d\n", __FILE__, __LINE__, (int)s_); exit(1); } } while (0)

typedef __half T;

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
#define WGN256(TY) \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, 0;\n}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
                 : "l"(a), "l"(b), "r"(scale_d) : "memory")
static __device__ __forceinline__ void wg_mma_n256(float *d, uint64_t a, uint64_t b, int scale_d, __half) { WGN256("f16"); }
#undef WGN256
#define WGN128(TY) \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                 : "l"(a), "l"(b), "r"(scale_d) : "memory")
static __device__ __forceinline__ void wg_mma_n128(float *d, uint64_t a, uint64_t b, int scale_d, __half) { WGN128("f16"); }
#undef WGN128
#define WGN192(TY) \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n" \
                 "wgmma.mma_async.sync.aligned.m64n192k16.f32." TY "." TY " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}, %96, %97, p, 1, 1, 0, 0;\n}\n" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]) \
                 : "l"(a), "l"(b), "r"(scale_d) : "memory")
static __device__ __forceinline__ void wg_mma_n192(float *d, uint64_t a, uint64_t b, int scale_d, __half) { WGN192("f16"); }
#undef WGN192
#endif

static __device__ __forceinline__ uint32_t sm_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ void bar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sm_addr(b)), "r"(count));
}
static __device__ __forceinline__ void bar_expect(uint64_t *b, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sm_addr(b)), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void bar_wait(uint64_t *b, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(sm_addr(b)), "r"(parity) : "memory");
}
static __device__ __forceinline__ void tma2(void *dst, const CUtensorMap *map, int x, int y, uint64_t *b) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(sm_addr(dst)), "l"((uint64_t)map), "r"(x), "r"(y), "r"(sm_addr(b)) : "memory");
}
/* K-major operand in shared memory, 128-byte swizzle: start >> 4, stride 1024 bytes between 8-row groups */
static __device__ __forceinline__ uint64_t desc(const void *p) {
    return ((uint64_t)(sm_addr(p) & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
static __device__ __forceinline__ void put2(T *p, float a, float b) { *(__half2 *)p = __floats2half2_rn(a, b); }

constexpr int BM = 128, BK = 64;

static __device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
static __device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* an arrival on the barrier at the same offset in cluster CTA q */
static __device__ __forceinline__ void bar_arrive_at(uint64_t *b, uint32_t q) {
    asm volatile("{\n .reg .b32 ra;\n mapa.shared::cluster.u32 ra, %0, %1;\n mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n"
                 ::"r"(sm_addr(b)), "r"(q) : "memory");
}
static __device__ __forceinline__ void bar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(sm_addr(b)) : "memory");
}
/* a box copied into the same offset of every CTA in mask, each one's barrier at bar's offset counting its bytes */
static __device__ __forceinline__ void tma2_mc(void *dst, const CUtensorMap *map, int x, int y, uint64_t *b, uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n"
                 ::"r"(sm_addr(dst)), "l"((uint64_t)map), "r"(x), "r"(y), "r"(sm_addr(b)), "h"(mask) : "memory");
}
static __device__ __forceinline__ void tma2_store(const CUtensorMap *map, int x, int y, const void *src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 ::"l"((uint64_t)map), "r"(x), "r"(y), "r"(sm_addr(src)) : "memory");
}

/* the products of one ring stage for a warpgroup's 64 rows: wait for the stage, four wgmma m64nBNk16 (A: 64 rows x 64
   of K at a, B: BN rows at b, both 128-byte swizzled), the tile's first from 0, committed as a group; then wait for the
   group before it, whose stage the caller may hand back */
template <int BN>
static __device__ __forceinline__ void wg_stage(float (&d)[BN / 2], const unsigned char *a, const unsigned char *b, uint64_t *full,
                                                unsigned parity, bool first) {
    bar_wait(full, parity);
#pragma unroll
    for (int i = 0; i < BN / 2; i++) asm volatile("" : "+f"(d[i])::"memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if constexpr (BN == 256) wg_mma_n256(d, desc(a + 32 * k), desc(b + 32 * k), !first || k > 0, T());
        else if constexpr (BN == 192) wg_mma_n192(d, desc(a + 32 * k), desc(b + 32 * k), !first || k > 0, T());
        else wg_mma_n128(d, desc(a + 32 * k), desc(b + 32 * k), !first || k > 0, T());
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < BN / 2; i++) asm volatile("" : "+f"(d[i])::"memory");
}
/* every group done: the accumulators may be read */
template <int N>
static __device__ __forceinline__ void wg_drain(float (&d)[N]) {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
/* the producer's copy of one ring stage: once the stage is free, X's box (128-byte swizzle) at a and W's at b onto its
   barrier, bytes in all */
static __device__ __forceinline__ void fill_stage(unsigned char *a, unsigned char *b, unsigned bytes, uint64_t *full, uint64_t *empty,
                                                  unsigned parity, const CUtensorMap *mx, const CUtensorMap *mw, int k, int m0, int n0) {
    bar_wait(empty, parity);
    bar_expect(full, bytes);
    tma2(a, mx, k, m0, full);
    tma2(b, mw, k, n0, full);
}
/* the same with W's box shared by the cluster's CL blocks (adjacent row blocks): this block copies its 1 / CL of
   W's rows (of bn) and multicasts them to all, each block's barrier counting the whole stage */
template <int CL>
static __device__ __forceinline__ void fill_stage_mc(unsigned char *a, unsigned char *b, int b_bytes, unsigned bytes, uint64_t *full,
                                                     uint64_t *empty, unsigned parity, const CUtensorMap *mx, const CUtensorMap *mw,
                                                     int k, int m0, int n0, int rank, int bn) {
    bar_wait(empty, parity);
    bar_expect(full, bytes);
    tma2(a, mx, k, m0, full);
    tma2_mc(b + rank * (b_bytes / CL), mw, k, n0 + rank * (bn / CL), full, (uint16_t)((1 << CL) - 1));
}
/* a plain product's producer: this block's units (u = cid, cid + ncl, ..; row block (u / nt) CL + rank of bm rows,
   column block u % nt of bn), each K's stages in turn through the ring of st stages */
template <int CL>
static __device__ __forceinline__ void produce(unsigned char *sh, int stage_b, int a_b, int b_b, int st, uint64_t *full, uint64_t *empty,
                                               const CUtensorMap *mx, const CUtensorMap *mw, int units, int nt, int cid, int ncl, int rank,
                                               int bm, int bn, int nk) {
    int it = 0;
    for (int u = cid; u < units; u += ncl) {
        const int m0 = ((u / nt) * CL + rank) * bm, n0 = (u % nt) * bn;
        for (int kb = 0; kb < nk; kb++, it++) {
            const int s = it % st;
            unsigned char *a = sh + s * stage_b;
            if (CL == 1) fill_stage(a, a + a_b, stage_b, &full[s], &empty[s], ((it / st) & 1) ^ 1, mx, mw, kb * BK, m0, n0);
            else fill_stage_mc<CL>(a, a + a_b, b_b, stage_b, &full[s], &empty[s], ((it / st) & 1) ^ 1, mx, mw, kb * BK, m0, n0, rank, bn);
        }
    }
}
/* four 8 x 8 matrices of T (a warp's r[0..3], as mma's accumulator layout) into a staging tile of 128-byte rows,
   128-byte swizzle: the lane's row address is row roww of 64-column group cg (sub-tiles of sub bytes) */
static __device__ __forceinline__ void stsm4(unsigned char *sg, int sub, int cg, int roww, int lane, const uint32_t (&r)[4]) {
    const uint32_t addr = sm_addr(sg + (cg / 8) * sub + roww * 128 + (((cg % 8) ^ (lane % 8)) * 16));
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]),
                 "r"(r[3]) : "memory");
}
/* v into the place of dst in every block of the cluster (CL blocks), each store counted on that block's barrier at
   bar's place (st.async: released at cluster scope with the count) */
template <int CL>
static __device__ __forceinline__ void push_all(const float *dst, uint64_t *bar, float v) {
#pragma unroll
    for (int q = 0; q < CL; q++)
        asm volatile("{\n .reg .b32 ra, rb;\n mapa.shared::cluster.u32 ra, %0, %2;\n mapa.shared::cluster.u32 rb, %1, %2;\n"
                     " st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [ra], %3, [rb];\n}\n"
                     ::"r"(sm_addr(dst)), "r"(sm_addr(bar)), "r"(q), "f"(v) : "memory");
}
/* a phase of a barrier that other blocks' stores complete: acquired at cluster scope */
static __device__ __forceinline__ void bar_wait_cluster(uint64_t *b, unsigned parity) {
    unsigned ok = 0;
    while (!ok)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(ok) : "r"(sm_addr(b)), "r"(parity) : "memory");
}

/* BN: tile columns (a consumer warpgroup's m64nBN accumulator); ST: ring stages; CL: CTAs a cluster, along M, each
   loading 1 / CL of W's box and multicasting it to all; TE: the epilogue through a swizzled staging tile in shared
   memory and TMA stores (else stores from registers) */
template <int BN, int ST, int CL, int TE>
__global__ void __launch_bounds__(384, 1) wg_gemm(const __grid_constant__ CUtensorMap mx, const __grid_constant__ CUtensorMap mw,
                                                  const __grid_constant__ CUtensorMap md, const T *__restrict__ bias,
                                                  T *__restrict__ D, int M, int N, int K, int epi) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int A_B = BM * BK * 2, B_B = BN * BK * 2, STAGE_B = A_B + B_B, R = BN / 2, E_B = (TE == 1 || TE == 2) ? BM * BN * 2 : 0;
    extern __shared__ __align__(1024) unsigned char sh_raw[];
    unsigned char *sh = (unsigned char *)(((uintptr_t)sh_raw + 1023) & ~(uintptr_t)1023), *stg = sh + ST * STAGE_B;
    uint64_t *full = (uint64_t *)(stg + E_B), *empty = full + ST;
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const int rank = CL > 1 ? (int)cluster_rank() : 0, cid = blockIdx.x / CL, ncl = gridDim.x / CL;
    const int mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN, units = (mt + CL - 1) / CL * nt, nk = K / BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) { bar_init(&full[s], 1); bar_init(&empty[s], 8 * CL); } /* lane 0 of every consumer warp */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (CL > 1) cluster_sync(); else __syncthreads();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (t == 0) {
            produce<CL>(sh, STAGE_B, A_B, B_B, ST, full, empty, &mx, &mw, units, nt, cid, ncl, rank, BM, BN, nk);
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1, warp = t / 32, lane = t % 32;
        float d[R];
        int it = 0;
        for (int u = cid; u < units; u += ncl) {
            const int m0 = ((u / nt) * CL + rank) * BM, n0 = (u % nt) * BN;
            __half2 bv[TE ? BN / 8 : 1]; /* TE: this thread's bias pairs, loaded before the tile's products */
            if constexpr (TE)
#pragma unroll
                for (int j = 0; j < BN / 8; j++) {
                    const int col = n0 + 8 * j + 2 * (lane % 4);
                    bv[j] = col < N ? *(const __half2 *)(bias + col) : __floats2half2_rn(0.0f, 0.0f);
                }
            for (int kb = 0; kb < nk; kb++, it++) {
                const int s = it % ST;
                wg_stage<BN>(d, sh + s * STAGE_B + c * (64 * BK * 2), sh + s * STAGE_B + A_B, &full[s], (it / ST) & 1, kb == 0);
                /* the group before this one is done: its stage goes back to every producer that fills it */
                if (kb > 0 && lane == 0) {
                    if (CL == 1) bar_arrive(&empty[(it - 1) % ST]);
                    else for (int q = 0; q < CL; q++) bar_arrive_at(&empty[(it - 1) % ST], q);
                }
            }
            wg_drain(d);
            if (lane == 0) {
                if (CL == 1) bar_arrive(&empty[(it - 1) % ST]);
                else for (int q = 0; q < CL; q++) bar_arrive_at(&empty[(it - 1) % ST], q);
            }
            if (!epi) { /* timing only: no epilogue */
                if (d[0] == 12345.0f && d[R - 1] == 54321.0f) D[0] = T();
                continue;
            }
            /* epilogue: thread's rows 16 warp + lane / 4 (+ 8), columns 8 j + 2 (lane % 4) (+ 1) */
            const int rr = c * 64 + warp * 16 + lane / 4, r0 = m0 + rr;
            if constexpr (TE == 3) {
                /* straight from registers, 8 bytes a lane: the two lanes of a pair swap halves so that each holds 4
                   adjacent columns (the even lane of group j, the odd lane of group j + 1), and a warp's store covers
                   32 whole bytes of each of its 8 rows */
                const bool odd = lane & 1;
                const int q = lane % 4;
#pragma unroll
                for (int j = 0; j < BN / 8; j += 2) {
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = r0 + 8 * h;
                        __half2 p0 = __floats2half2_rn(d[4 * j + 2 * h] + __low2float(bv[j]), d[4 * j + 2 * h + 1] + __high2float(bv[j]));
                        __half2 p1 = __floats2half2_rn(d[4 * j + 4 + 2 * h] + __low2float(bv[j + 1]),
                                                       d[4 * j + 4 + 2 * h + 1] + __high2float(bv[j + 1]));
                        const uint32_t u0 = *(uint32_t *)&p0, u1 = *(uint32_t *)&p1;
                        const uint32_t got = __shfl_xor_sync(0xffffffffu, odd ? u0 : u1, 1);
                        const int col = n0 + (odd ? 8 * (j + 1) + 2 * (q - 1) : 8 * j + 2 * q);
                        if (r < M && col < N) *(uint2 *)(D + (size_t)r * N + col) = odd ? make_uint2(got, u1) : make_uint2(u0, got);
                    }
                }
            } else if constexpr (TE == 2) {
                /* per warpgroup: its 64 rows into its own staging tile by stmatrix (four 8 x 8 matrices a go: rows
                   0-7 and 8-15 of column groups j and j + 1), then its own TMA stores of 64 x 64 */
                unsigned char *sg = stg + c * (64 * BN * 2);
                if (t == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
                const int k4 = lane / 8, roww = warp * 16 + (k4 % 2) * 8 + lane % 8;
#pragma unroll
                for (int j = 0; j < BN / 8; j += 2) {
                    if (epi == 2) break; /* timing: no staging writes */
                    uint32_t r[4];
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int jj = j + e / 2, h = e % 2;
                        __half2 v = __floats2half2_rn(d[4 * jj + 2 * h] + __low2float(bv[jj]), d[4 * jj + 2 * h + 1] + __high2float(bv[jj]));
                        r[e] = *(uint32_t *)&v;
                    }
                    const int cg = j + k4 / 2;
                    stsm4(sg, 64 * 128, cg, roww, lane, r);
                }
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
                if (t == 0 && m0 + 64 * c < M && epi != 3) { /* epi 3, timing: no stores */
                    for (int q = 0; q < BN / 64; q++)
                        if (n0 + 64 * q < N) tma2_store(&md, n0 + 64 * q, m0 + 64 * c, sg + q * (64 * 128));
                    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                }
            } else if constexpr (TE == 1) {
                const bool issuer = threadIdx.x == 128;
                if (issuer) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                asm volatile("bar.sync 1, 256;\n" ::: "memory");
#pragma unroll
                for (int j = 0; j < BN / 8; j++) {
                    const int cc = 8 * j + 2 * (lane % 4), col = n0 + cc;
                    const float b0 = __low2float(bv[j]), b1 = __high2float(bv[j]);
                    (void)col;
                    unsigned char *sub = stg + (cc / 64) * (BM * 128);
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = rr + 8 * h;
                        *(__half2 *)(sub + r * 128 + ((((cc % 64) / 8) ^ (r % 8)) * 16) + (cc % 8) * 2) =
                            __floats2half2_rn(d[4 * j + 2 * h] + b0, d[4 * j + 2 * h + 1] + b1);
                    }
                }
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                asm volatile("bar.sync 1, 256;\n" ::: "memory");
                if (issuer && m0 < M) {
                    for (int q = 0; q < BN / 64; q++)
                        if (n0 + 64 * q < N) tma2_store(&md, n0 + 64 * q, m0, stg + q * (BM * 128));
                    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                }
            } else {
#pragma unroll
                for (int j = 0; j < BN / 8; j++) {
                    const int col = n0 + 8 * j + 2 * (lane % 4);
                    if (col >= N) continue;
                    const float b0 = __half2float(bias[col]), b1 = __half2float(bias[col + 1]);
                    if (r0 < M) put2(D + (size_t)r0 * N + col, d[4 * j] + b0, d[4 * j + 1] + b1);
                    if (r0 + 8 < M) put2(D + (size_t)(r0 + 8) * N + col, d[4 * j + 2] + b0, d[4 * j + 3] + b1);
                }
            }
        }
        if ((TE == 1 && threadIdx.x == 128) || (TE == 2 && t == 0)) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
    /* no CTA leaves while a peer may still arrive on its barriers */
    if (CL > 1) cluster_sync();
#endif
}

/* Ping-pong: each consumer warpgroup owns whole 128 x 128 tiles, the two taking the producer's tiles in turn, so one
   warpgroup's epilogue runs while the other's products use the tensor cores. Unit j of this CTA's sequence (as the
   producer loads it: ring iterations j nk .. j nk + nk - 1) goes to warpgroup 1 + j % 2. A warpgroup's tile is two
   m64n128k16 a 16 of K (rows 0-63 and 64-127 of the stage's X box). Epilogue: bias (loaded at the tile's start),
   T, into the warpgroup's own swizzled staging tile, two TMA stores of 128 x 64. CL: as wg_gemm. */
template <int ST, int CL>
__global__ void __launch_bounds__(384, 1) wg_pp(const __grid_constant__ CUtensorMap mx, const __grid_constant__ CUtensorMap mw,
                                                const __grid_constant__ CUtensorMap md, const T *__restrict__ bias,
                                                T *__restrict__ D, int M, int N, int K, int epi) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int PBM = 128, PBN = 128, A_B = PBM * BK * 2, B_B = PBN * BK * 2, STAGE_B = A_B + B_B, E_B = PBM * PBN * 2;
    extern __shared__ __align__(1024) unsigned char sh_raw[];
    unsigned char *sh = (unsigned char *)(((uintptr_t)sh_raw + 1023) & ~(uintptr_t)1023), *stg0 = sh + ST * STAGE_B;
    uint64_t *full = (uint64_t *)(stg0 + 2 * E_B), *empty = full + ST, *done = empty + ST;
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const int rank = CL > 1 ? (int)cluster_rank() : 0, cid = blockIdx.x / CL, ncl = gridDim.x / CL;
    const int mt = (M + PBM - 1) / PBM, nt = (N + PBN - 1) / PBN, units = (mt + CL - 1) / CL * nt, nk = K / BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) { bar_init(&full[s], 1); bar_init(&empty[s], 4 * CL); } /* lane 0 of the consumer's warps */
        bar_init(&done[0], 1);
        bar_init(&done[1], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (CL > 1) cluster_sync(); else __syncthreads();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (t == 0) {
            produce<CL>(sh, STAGE_B, A_B, B_B, ST, full, empty, &mx, &mw, units, nt, cid, ncl, rank, PBM, PBN, nk);
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1, warp = t / 32, lane = t % 32;
        unsigned char *stg = stg0 + c * E_B;
        float d[2][64];
        int j = c, n = 0;
        for (int u = cid + c * ncl; u < units; u += 2 * ncl, j += 2, n++) {
            const int m0 = ((u / nt) * CL + rank) * PBM, n0 = (u % nt) * PBN;
            __half2 bv[16];
#pragma unroll
            for (int q = 0; q < 16; q++) {
                const int col = n0 + 8 * q + 2 * (lane % 4);
                bv[q] = col < N ? *(const __half2 *)(bias + col) : __floats2half2_rn(0.0f, 0.0f);
            }
            /* the other warpgroup has waited for every stage of the unit before this one, so each full barrier this
               unit waits for is at most one phase from the one wanted (a parity wait cannot tell phases two apart) */
            if (j > 0) bar_wait(&done[1 - c], (c == 1 ? n : n - 1) & 1);
            for (int kb = 0; kb < nk; kb++) {
                const int it = j * nk + kb, s = it % ST;
                bar_wait(&full[s], (it / ST) & 1);
                const unsigned char *a = sh + s * STAGE_B, *b = a + A_B;
#pragma unroll
                for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[0][i]), "+f"(d[1][i])::"memory");
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    wg_mma_n128(d[0], desc(a + 32 * k), desc(b + 32 * k), kb > 0 || k > 0, T());
                    wg_mma_n128(d[1], desc(a + 64 * BK * 2 + 32 * k), desc(b + 32 * k), kb > 0 || k > 0, T());
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
#pragma unroll
                for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[0][i]), "+f"(d[1][i])::"memory");
                if (kb > 0 && lane == 0) {
                    if (CL == 1) bar_arrive(&empty[(it - 1) % ST]);
                    else for (int q = 0; q < CL; q++) bar_arrive_at(&empty[(it - 1) % ST], q);
                }
            }
            if (t == 0) bar_arrive(&done[c]);
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
            for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[0][i]), "+f"(d[1][i])::"memory");
            if (lane == 0) {
                const int last = (j * nk + nk - 1) % ST;
                if (CL == 1) bar_arrive(&empty[last]);
                else for (int q = 0; q < CL; q++) bar_arrive_at(&empty[last], q);
            }
            if (!epi) {
                if (d[0][0] == 12345.0f && d[1][63] == 54321.0f) D[0] = T();
                continue;
            }
            /* epilogue: rows 64 mi + 16 warp + lane / 4 (+ 8), columns 8 q + 2 (lane % 4) (+ 1) */
            if (t == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
            asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int q = 0; q < 16; q++) {
                    const int cc = 8 * q + 2 * (lane % 4);
                    const float b0 = __low2float(bv[q]), b1 = __high2float(bv[q]);
                    unsigned char *sub = stg + (cc / 64) * (PBM * 128);
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = 64 * mi + 16 * warp + lane / 4 + 8 * h;
                        *(__half2 *)(sub + r * 128 + ((((cc % 64) / 8) ^ (r % 8)) * 16) + (cc % 8) * 2) =
                            __floats2half2_rn(d[mi][4 * q + 2 * h] + b0, d[mi][4 * q + 2 * h + 1] + b1);
                    }
                }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
            if (t == 0 && m0 < M) {
                for (int q = 0; q < 2; q++)
                    if (n0 + 64 * q < N) tma2_store(&md, n0 + 64 * q, m0, stg + q * (PBM * 128));
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            }
        }
        if (t == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
    if (CL > 1) cluster_sync();
#endif
}

/* the cluster's sums of two rows a thread (rows rw and rw + 8 of a tile of `rows`, a row's part spread over a quad's
   4 lanes): the quad's sums go into slot [rank] of pp in every block, counted on xbar there (armed by its `arm`
   thread for CL * rows values a phase); then each row's CL sums, added in rank order, replace v */
template <int CL>
static __device__ __forceinline__ void exchange2(float (&v)[2], float *pp, uint64_t *xbar, int rows, int rank, int rw, int lane, bool arm,
                                                 unsigned parity) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        v[h] += __shfl_xor_sync(0xffffffffu, v[h], 1);
        v[h] += __shfl_xor_sync(0xffffffffu, v[h], 2);
    }
    if (arm) bar_expect(xbar, CL * rows * 4);
    if (lane % 4 == 0)
#pragma unroll
        for (int h = 0; h < 2; h++) push_all<CL>(pp + rank * rows + rw + 8 * h, xbar, v[h]);
    bar_wait_cluster(xbar, parity);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float tot = 0.0f;
#pragma unroll
        for (int q = 0; q < CL; q++) tot += pp[q * rows + rw + 8 * h];
        v[h] = tot;
    }
}

/* y = (x - mean) rs gamma + beta in T, for a warpgroup's 64 x BN tile held as wgmma accumulators (d: rows rw and
   rw + 8 of the thread, rw = 16 warp + lane / 4; mean, rs: those rows'), into its staging tile sg (64-row sub-tiles
   of 64 columns, 128-byte swizzle) by stmatrix */
template <int BN>
static __device__ __forceinline__ void ln_to_staging(const float (&d)[BN / 2], const float (&mean)[2], const float (&rs)[2],
                                                     const float *gamma, const float *beta, int n0, unsigned char *sg, int warp, int lane) {
    const int k4 = lane / 8, roww = warp * 16 + (k4 % 2) * 8 + lane % 8;
#pragma unroll
    for (int j = 0; j < BN / 8; j += 2) {
        uint32_t r[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int jj = j + e / 2, h = e % 2, col = n0 + 8 * jj + 2 * (lane % 4);
            const float2 g = *(const float2 *)(gamma + col), bb = *(const float2 *)(beta + col);
            __half2 v = __floats2half2_rn((d[4 * jj + 2 * h] - mean[h]) * rs[h] * g.x + bb.x,
                                          (d[4 * jj + 2 * h + 1] - mean[h]) * rs[h] * g.y + bb.y);
            r[e] = *(uint32_t *)&v;
        }
        stsm4(sg, 64 * 128, j + k4 / 2, roww, lane, r);
    }
}

/* The product into the residual with the residual add and the next layer norm in its epilogue (item 174's second
   question): x [M][C] (fp32, in place) += T(X W^T + bias); y = LN(x) (gamma, beta fp32; eps 1e-5) in T. A cluster of
   CL blocks covers a row block's C = CL * BN columns (block rank r: columns r BN ..), each block the coop kernel's
   128 x BN tile with TE 2's epilogue for y; the row sums, then the sums of squares about the mean, go from each
   block's shared memory to every block of the cluster (a transaction-free barrier per exchange: one arrival from
   each block, released at cluster scope; two buffers by tile parity). XT 0: the producer prefetches the tile's x
   into L2 when it starts the tile's loads, and the epilogue loads it from there; XT 1: the producer copies the
   tile's x by TMA (boxes of 32 x 128 fp32, 128-byte swizzle) into a shared tile that the epilogue reads and then
   reuses as y's staging (mx_: x's map; xfull / xempty its barriers). */
template <int BN, int ST, int CL, bool XT>
__global__ void __launch_bounds__(384, 1) wg_ln(const __grid_constant__ CUtensorMap mx, const __grid_constant__ CUtensorMap mw,
                                                const __grid_constant__ CUtensorMap my, const __grid_constant__ CUtensorMap mx_,
                                                const T *__restrict__ bias, float *__restrict__ x, const float *__restrict__ gamma, const float *__restrict__ beta,
                                                int M, int K, int skip) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int A_B = BM * BK * 2, B_B = BN * BK * 2, STAGE_B = A_B + B_B, R = BN / 2, E_B = XT ? BM * BN * 4 : BM * BN * 2, C = CL * BN;
    extern __shared__ __align__(1024) unsigned char sh_raw[];
    unsigned char *sh = (unsigned char *)(((uintptr_t)sh_raw + 1023) & ~(uintptr_t)1023), *stg = sh + ST * STAGE_B;
    uint64_t *full = (uint64_t *)(stg + E_B), *empty = full + ST, *xb = empty + ST; /* xb[4]: exchanges (sum, sq) x buffer */
    uint64_t *xfull = xb + 4, *xempty = xb + 5;
    float *part = (float *)(xb + 6);                                                /* part[4][CL][BM] */
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const int rank = (int)cluster_rank(), cid = blockIdx.x / CL, ncl = gridDim.x / CL;
    const int mt = (M + BM - 1) / BM, nk = K / BK, n0 = rank * BN;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) { bar_init(&full[s], 1); bar_init(&empty[s], 8); }
        for (int i = 0; i < 4; i++) bar_init(&xb[i], 1); /* the block's own expect; the bytes come from every block */
        bar_init(xfull, 1);
        bar_init(xempty, 2); /* each consumer warpgroup, once its y stores have read the staging */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_sync();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (t == 0) {
            int it = 0;
            int tp = 0;
            for (int u = cid; u < mt; u += ncl, tp++) {
                const int m0 = u * BM;
                if (!XT)
                    for (int r = 0; r < BM && m0 + r < M; r++)
                        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(x + (size_t)(m0 + r) * C + n0), "r"(BN * 4) : "memory");
                for (int kb = 0; kb < nk; kb++, it++) {
                    if (XT && kb == (nk > 1 ? 1 : 0)) { /* the tile's x, once the last tile's y has left the staging */
                        bar_wait(xempty, tp & 1); /* phase tp: the consumers have begun tile tp, so tile tp - 1's y is out */
                        bar_expect(xfull, BM * BN * 4);
                        for (int q = 0; q < BN / 32; q++) tma2(stg + q * (BM * 128), &mx_, n0 + 32 * q, m0, xfull);
                    }
                    const int s = it % ST;
                    fill_stage(sh + s * STAGE_B, sh + s * STAGE_B + A_B, STAGE_B, &full[s], &empty[s], ((it / ST) & 1) ^ 1, &mx, &mw, kb * BK, m0, n0);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1, warp = t / 32, lane = t % 32;
        float d[R];
        int it = 0, tl = 0;
        for (int u = cid; u < mt; u += ncl, tl++) {
            const int m0 = u * BM;
            for (int kb = 0; kb < nk; kb++, it++) {
                const int s = it % ST;
                wg_stage<BN>(d, sh + s * STAGE_B + c * (64 * BK * 2), sh + s * STAGE_B + A_B, &full[s], (it / ST) & 1, kb == 0);
                if (kb > 0 && lane == 0) bar_arrive(&empty[(it - 1) % ST]);
                if (XT && kb == 0 && t == 0) { /* the last tile's y stores have read the staging: x may come in */
                    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                    bar_arrive(xempty);
                }
            }
            wg_drain(d);
            if (lane == 0) bar_arrive(&empty[(it - 1) % ST]);
            /* rows rw + 8 h of the tile (rw = 64 c + 16 warp + lane / 4), columns n0 + 8 j + 2 (lane % 4) (+ 1) */
            const int rw = c * 64 + warp * 16 + lane / 4, buf = tl & 1;
            if (XT) bar_wait(xfull, tl & 1);
            float sum[2] = {0.0f, 0.0f};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int row = m0 + rw + 8 * h;
                constexpr int XJ = 8; /* x loads in flight a thread: groups of XJ column pairs */
#pragma unroll
                for (int j0 = 0; j0 < BN / 8; j0 += XJ) {
                    float2 xv[XJ];
#pragma unroll
                    for (int j = 0; j < XJ; j++) {
                        const int cc = 8 * (j0 + j) + 2 * (lane % 4), rt = rw + 8 * h; /* box cc / 32, its 16-byte chunk swizzled */
                        if (XT)
                            xv[j] = *(const float2 *)(stg + (cc / 32) * (BM * 128) + rt * 128 + ((((cc % 32) / 4) ^ (rt % 8)) * 16) + (cc % 4) * 4);
                        else
                            xv[j] = row < M ? *(const float2 *)(x + (size_t)row * C + n0 + cc) : make_float2(0.0f, 0.0f);
                    }
#pragma unroll
                    for (int jj = 0; jj < XJ; jj++) {
                        const int j = j0 + jj;
                        const __half2 bj = *(const __half2 *)(bias + n0 + 8 * j + 2 * (lane % 4));
                        const __half2 p = __floats2half2_rn(d[4 * j + 2 * h] + __low2float(bj), d[4 * j + 2 * h + 1] + __high2float(bj));
                        d[4 * j + 2 * h] = xv[jj].x + __low2float(p);
                        d[4 * j + 2 * h + 1] = xv[jj].y + __high2float(p);
                        sum[h] += d[4 * j + 2 * h] + d[4 * j + 2 * h + 1];
                    }
                }
            }
            /* exchange e (0: sums, 1: squares about the mean) of this tile's parity: quad sums into part, then every
               block's 128 values for each row added in rank order */
            auto exchange = [&](float (&v)[2], int e) {
                if (skip & 1) return; /* timing: no exchange (the block's own sums) */
                exchange2<CL>(v, part + (2 * e + buf) * CL * BM, &xb[2 * e + buf], BM, rank, rw, lane, threadIdx.x == 128, (tl >> 1) & 1);
            };
            exchange(sum, 0);
            float mean[2], sq[2] = {0.0f, 0.0f};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                mean[h] = sum[h] * (1.0f / C);
#pragma unroll
                for (int j = 0; j < BN / 8; j++) {
                    const float a0 = d[4 * j + 2 * h] - mean[h], a1 = d[4 * j + 2 * h + 1] - mean[h];
                    sq[h] += a0 * a0 + a1 * a1;
                }
            }
            exchange(sq, 1);
            /* x back; y into this warpgroup's staging by stmatrix, then its TMA stores */
            unsigned char *sg = stg + c * (64 * BN * 2);
            if (!XT && t == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
            asm volatile("bar.sync %0, 128;\n" ::"r"(2 + c) : "memory");
            float rs[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                rs[h] = rsqrtf(sq[h] * (1.0f / C) + 1e-5f);
                const int row = m0 + rw + 8 * h;
                if (XT) /* x back where it was read in the shared tile, for TMA stores below */
#pragma unroll
                    for (int j = 0; j < BN / 8; j++) {
                        const int cc = 8 * j + 2 * (lane % 4), rt = rw + 8 * h;
                        *(float2 *)(stg + (cc / 32) * (BM * 128) + rt * 128 + ((((cc % 32) / 4) ^ (rt % 8)) * 16) + (cc % 4) * 4) =
                            make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
                    }
                else if (row < M && !(skip & 2)) /* skip 2, timing: x not stored */
#pragma unroll
                    for (int j = 0; j < BN / 8; j++)
                        *(float2 *)(x + (size_t)row * C + n0 + 8 * j + 2 * (lane % 4)) = make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
            }
            if (XT) { /* x's tile out by TMA; y may take its place once the copies have read it */
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                asm volatile("bar.sync 1, 256;\n" ::: "memory");
                if (threadIdx.x == 128) {
                    if (!(skip & 2)) {
                        for (int q = 0; q < BN / 32; q++) tma2_store(&mx_, n0 + 32 * q, m0, stg + q * (BM * 128));
                        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                    }
                    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                }
                asm volatile("bar.sync 1, 256;\n" ::: "memory");
            }
            ln_to_staging<BN>(d, mean, rs, gamma, beta, n0, sg, warp, lane);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            asm volatile("bar.sync %0, 128;\n" ::"r"(2 + c) : "memory");
            if (t == 0 && m0 + 64 * c < M && !(skip & 4)) { /* skip 4, timing: y not stored */
                for (int q = 0; q < BN / 64; q++) tma2_store(&my, n0 + 64 * q, m0 + 64 * c, sg + q * (64 * 128));
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            }
        }
        if (t == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
    cluster_sync();
#endif
}

/* The fused form in ping-pong: each consumer warpgroup owns whole 64-row tiles (64 x BN, wgmma m64nBNk16), the two
   taking the producer's row blocks in turn (the unit order of wg_pp, with its wait for the other warpgroup's
   previous tile), so that one warpgroup's epilogue (its exchanges and its x and y stores) runs beside the other's
   products. Each warpgroup has its own x tile in shared memory (boxes of 32 x 64 fp32 by TMA, reused for y's
   staging once x's TMA stores have read it), its own exchange barriers and buffers; a cluster of CL blocks covers
   the C = CL * BN columns as in wg_ln, the same warpgroup of every block on the same row block. */
template <int BN, int ST, int CL>
__global__ void __launch_bounds__(384, 1) wg_lnp(const __grid_constant__ CUtensorMap mx, const __grid_constant__ CUtensorMap mw,
                                                 const __grid_constant__ CUtensorMap my, const __grid_constant__ CUtensorMap mxs,
                                                 const T *__restrict__ bias, const float *__restrict__ gamma,
                                                 const float *__restrict__ beta, int M, int K) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int PM = 64, A_B = PM * BK * 2, B_B = BN * BK * 2, STAGE_B = A_B + B_B, R = BN / 2, X_B = PM * BN * 4, C = CL * BN;
    extern __shared__ __align__(1024) unsigned char sh_raw[];
    unsigned char *sh = (unsigned char *)(((uintptr_t)sh_raw + 1023) & ~(uintptr_t)1023), *xt0 = sh + ST * STAGE_B;
    uint64_t *full = (uint64_t *)(xt0 + 2 * X_B), *empty = full + ST, *done = empty + ST; /* done[2] */
    uint64_t *xfull = done + 2, *xempty = xfull + 2, *xb = xempty + 2;                  /* [2]; [2]; [2 wg][4] */
    float *part = (float *)(xb + 8);                                                     /* [2 wg][4][CL][PM] */
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const int rank = (int)cluster_rank(), cid = blockIdx.x / CL, ncl = gridDim.x / CL;
    const int mt = (M + PM - 1) / PM, nk = K / BK, n0 = rank * BN;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) { bar_init(&full[s], 1); bar_init(&empty[s], 4); }
        for (int i = 0; i < 2; i++) { bar_init(&done[i], 1); bar_init(&xfull[i], 1); bar_init(&xempty[i], 1); }
        for (int i = 0; i < 8; i++) bar_init(&xb[i], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_sync();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (t == 0) {
            int it = 0, j = 0;
            for (int u = cid; u < mt; u += ncl, j++) {
                const int m0 = u * PM, w = j & 1, n = j >> 1;
                for (int kb = 0; kb < nk; kb++, it++) {
                    if (kb == (nk > 1 ? 1 : 0)) { /* the tile's x, once warpgroup w has begun it (its last y is out) */
                        bar_wait(&xempty[w], n & 1);
                        bar_expect(&xfull[w], X_B);
                        for (int q = 0; q < BN / 32; q++) tma2(xt0 + w * X_B + q * (PM * 128), &mxs, n0 + 32 * q, m0, &xfull[w]);
                    }
                    const int s = it % ST;
                    fill_stage(sh + s * STAGE_B, sh + s * STAGE_B + A_B, STAGE_B, &full[s], &empty[s], ((it / ST) & 1) ^ 1, &mx, &mw, kb * BK, m0, n0);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1, warp = t / 32, lane = t % 32;
        unsigned char *xt = xt0 + c * X_B;
        float d[R];
        int j = c, n = 0;
        for (int u = cid + c * ncl; u < mt; u += 2 * ncl, j += 2, n++) {
            const int m0 = u * PM;
            if (j > 0) bar_wait(&done[1 - c], (c == 1 ? n : n - 1) & 1);
            for (int kb = 0; kb < nk; kb++) {
                const int it = j * nk + kb, s = it % ST;
                wg_stage<BN>(d, sh + s * STAGE_B, sh + s * STAGE_B + A_B, &full[s], (it / ST) & 1, kb == 0);
                if (kb > 0 && lane == 0) bar_arrive(&empty[(it - 1) % ST]);
                if (kb == 0 && t == 0) { /* this warpgroup's last y has left its x tile: the next x may come in */
                    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                    bar_arrive(&xempty[c]);
                }
            }
            if (t == 0) bar_arrive(&done[c]);
            wg_drain(d);
            if (lane == 0) bar_arrive(&empty[(j * nk + nk - 1) % ST]);
            /* rows rw + 8 h of the tile (rw = 16 warp + lane / 4), columns n0 + 8 jj + 2 (lane % 4) (+ 1) */
            const int rw = warp * 16 + lane / 4, buf = n & 1;
            bar_wait(&xfull[c], n & 1);
            float sum[2] = {0.0f, 0.0f};
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int jj = 0; jj < BN / 8; jj++) {
                    const int cc = 8 * jj + 2 * (lane % 4), rt = rw + 8 * h;
                    const float2 xv = *(const float2 *)(xt + (cc / 32) * (PM * 128) + rt * 128 + ((((cc % 32) / 4) ^ (rt % 8)) * 16) + (cc % 4) * 4);
                    const __half2 bj = *(const __half2 *)(bias + n0 + cc);
                    const __half2 p = __floats2half2_rn(d[4 * jj + 2 * h] + __low2float(bj), d[4 * jj + 2 * h + 1] + __high2float(bj));
                    d[4 * jj + 2 * h] = xv.x + __low2float(p);
                    d[4 * jj + 2 * h + 1] = xv.y + __high2float(p);
                    sum[h] += d[4 * jj + 2 * h] + d[4 * jj + 2 * h + 1];
                }
            auto exchange = [&](float (&v)[2], int e) {
                exchange2<CL>(v, part + ((c * 2 + e) * 2 + buf) * CL * PM, &xb[c * 4 + 2 * e + buf], PM, rank, rw, lane, t == 0, (n >> 1) & 1);
            };
            exchange(sum, 0);
            float mean[2], sq[2] = {0.0f, 0.0f}, rs[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                mean[h] = sum[h] * (1.0f / C);
#pragma unroll
                for (int jj = 0; jj < BN / 8; jj++) {
                    const float a0 = d[4 * jj + 2 * h] - mean[h], a1 = d[4 * jj + 2 * h + 1] - mean[h];
                    sq[h] += a0 * a0 + a1 * a1;
                }
            }
            exchange(sq, 1);
            /* x back into its tile and out by TMA; then y in its place, out by TMA */
#pragma unroll
            for (int h = 0; h < 2; h++) {
                rs[h] = rsqrtf(sq[h] * (1.0f / C) + 1e-5f);
#pragma unroll
                for (int jj = 0; jj < BN / 8; jj++) {
                    const int cc = 8 * jj + 2 * (lane % 4), rt = rw + 8 * h;
                    *(float2 *)(xt + (cc / 32) * (PM * 128) + rt * 128 + ((((cc % 32) / 4) ^ (rt % 8)) * 16) + (cc % 4) * 4) =
                        make_float2(d[4 * jj + 2 * h], d[4 * jj + 2 * h + 1]);
                }
            }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
            if (t == 0) {
                for (int q = 0; q < BN / 32; q++) tma2_store(&mxs, n0 + 32 * q, m0, xt + q * (PM * 128));
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
            }
            asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
            ln_to_staging<BN>(d, mean, rs, gamma, beta, n0, xt, warp, lane);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
            if (t == 0 && m0 < M) {
                for (int q = 0; q < BN / 64; q++) tma2_store(&my, n0 + 64 * q, m0, xt + q * (PM * 128));
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            }
        }
        if (t == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
    cluster_sync();
#endif
}

/* The fused form with an epilogue warpgroup: warpgroups 1 and 2 run the cooperative 128 x BN tile's products and
   leave T(product + bias) in one of two staging tiles (stmatrix, swizzled as TE 2's), then go on to the next tile;
   warpgroup 3 (thread i: row i of the tile, its BN columns in 16-byte chunks, in order) adds it to x, sums the row,
   exchanges sums within the cluster as wg_ln, re-reads its new x from L2 for the squares about the mean and for y,
   writes y into the staging tile it came from and stores it by TMA. The products and the epilogue of the tile before
   run at once. Warpgroup 0: the producer (one thread), which also prefetches the tile's x into L2. 512 threads. */
template <int BN, int ST, int CL>
__global__ void __launch_bounds__(512, 1) wg_lne(const __grid_constant__ CUtensorMap mx, const __grid_constant__ CUtensorMap mw,
                                                 const __grid_constant__ CUtensorMap my, const T *__restrict__ bias,
                                                 float *__restrict__ x, const float *__restrict__ gamma, const float *__restrict__ beta,
                                                 int M, int K) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int A_B = BM * BK * 2, B_B = BN * BK * 2, STAGE_B = A_B + B_B, R = BN / 2, P_B = BM * BN * 2, C = CL * BN, NCH = BN / 8;
    extern __shared__ __align__(1024) unsigned char sh_raw[];
    unsigned char *sh = (unsigned char *)(((uintptr_t)sh_raw + 1023) & ~(uintptr_t)1023), *pst = sh + ST * STAGE_B; /* pst [2][P_B] */
    uint64_t *full = (uint64_t *)(pst + 2 * P_B), *empty = full + ST, *pfull = empty + ST, *pempty = pfull + 2, *xb = pempty + 2;
    float *part = (float *)(xb + 4); /* [2 e][2 buf][CL][BM], then rowv [BM], rowq [BM] */
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128, lane = t % 32;
    const int rank = (int)cluster_rank(), cid = blockIdx.x / CL, ncl = gridDim.x / CL;
    const int mt = (M + BM - 1) / BM, nk = K / BK, n0 = rank * BN;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) { bar_init(&full[s], 1); bar_init(&empty[s], 8); }
        for (int i = 0; i < 2; i++) { bar_init(&pfull[i], 8); bar_init(&pempty[i], 1); }
        for (int i = 0; i < 4; i++) bar_init(&xb[i], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    cluster_sync();
    /* staging byte of tile row r, column cc (a multiple of 8): TE 2's layout, warpgroup r / 64's half */
    auto pat = [&](unsigned char *pb, int r, int cc) {
        return pb + (r / 64) * (64 * BN * 2) + (cc / 64) * (64 * 128) + (r % 64) * 128 + ((((cc % 64) / 8) ^ (r % 8)) * 16);
    };
    if (wg == 0) {
        if (t == 0) {
            int it = 0;
            for (int u = cid; u < mt; u += ncl) {
                const int m0 = u * BM;
                for (int r = 0; r < BM && m0 + r < M; r++)
                    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(x + (size_t)(m0 + r) * C + n0), "r"(BN * 4) : "memory");
                for (int kb = 0; kb < nk; kb++, it++) {
                    const int s = it % ST;
                    fill_stage(sh + s * STAGE_B, sh + s * STAGE_B + A_B, STAGE_B, &full[s], &empty[s], ((it / ST) & 1) ^ 1, &mx, &mw, kb * BK, m0, n0);
                }
            }
        }
    } else if (wg < 3) {
        const int c = wg - 1, warp = t / 32;
        float d[R];
        int it = 0, tl = 0;
        for (int u = cid; u < mt; u += ncl, tl++) {
            for (int kb = 0; kb < nk; kb++, it++) {
                const int s = it % ST;
                wg_stage<BN>(d, sh + s * STAGE_B + c * (64 * BK * 2), sh + s * STAGE_B + A_B, &full[s], (it / ST) & 1, kb == 0);
                if (kb > 0 && lane == 0) bar_arrive(&empty[(it - 1) % ST]);
            }
            wg_drain(d);
            if (lane == 0) bar_arrive(&empty[(it - 1) % ST]);
            /* T(product + bias) into staging tile tl % 2 once the epilogue is done with it */
            unsigned char *pb = pst + (tl & 1) * P_B + c * (64 * BN * 2);
            bar_wait(&pempty[tl & 1], ((tl >> 1) & 1) ^ 1);
            const int k4 = lane / 8, roww = warp * 16 + (k4 % 2) * 8 + lane % 8;
#pragma unroll
            for (int j = 0; j < BN / 8; j += 2) {
                uint32_t r[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int jj = j + e / 2, h = e % 2;
                    const __half2 bj = *(const __half2 *)(bias + n0 + 8 * jj + 2 * (lane % 4));
                    __half2 v = __floats2half2_rn(d[4 * jj + 2 * h] + __low2float(bj), d[4 * jj + 2 * h + 1] + __high2float(bj));
                    r[e] = *(uint32_t *)&v;
                }
                const int cg = j + k4 / 2;
                stsm4(pb, 64 * 128, cg, roww, lane, r);
            }
            __syncwarp();
            if (lane == 0) bar_arrive(&pfull[tl & 1]);
        }
    } else {
        /* the epilogue: a warp a row (rows ew, ew + 4, ..; lane l < NCH its 16-byte chunk l, coalesced), the row's
           sums by a fixed shuffle tree into rowv; the exchanges a thread a row (thread t: row t) */
        float *rowv = part + 4 * CL * BM, *rowq = rowv + BM;
        const int ew = t / 32;
        int tl = 0;
        for (int u = cid; u < mt; u += ncl, tl++) {
            const int m0 = u * BM, b = tl & 1;
            unsigned char *pb = pst + b * P_B;
            bar_wait(&pfull[b], (tl >> 1) & 1);
            auto warp_sum = [&](float v) {
#pragma unroll
                for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                return v;
            };
            constexpr int RB = 8; /* rows a warp has in flight */
            for (int r0 = ew * RB; r0 < BM; r0 += 4 * RB) {
                float4 xa_[RB], xb_[RB];
                uint4 pv[RB];
#pragma unroll
                for (int i = 0; i < RB; i++) {
                    const int row = m0 + r0 + i;
                    xa_[i] = xb_[i] = make_float4(0.f, 0.f, 0.f, 0.f);
                    if (lane < NCH) {
                        pv[i] = *(const uint4 *)pat(pb, r0 + i, 8 * lane);
                        if (row < M) {
                            const float *xr = x + (size_t)row * C + n0 + 8 * lane;
                            xa_[i] = *(const float4 *)xr;
                            xb_[i] = *(const float4 *)(xr + 4);
                        }
                    }
                }
#pragma unroll
                for (int i = 0; i < RB; i++) {
                    const int row = m0 + r0 + i;
                    float sm = 0.0f;
                    if (lane < NCH) {
                        float4 x0 = xa_[i], x1 = xb_[i];
                        const __half2 *h = (const __half2 *)&pv[i];
                        x0.x += __low2float(h[0]); x0.y += __high2float(h[0]); x0.z += __low2float(h[1]); x0.w += __high2float(h[1]);
                        x1.x += __low2float(h[2]); x1.y += __high2float(h[2]); x1.z += __low2float(h[3]); x1.w += __high2float(h[3]);
                        sm = ((x0.x + x0.y) + (x0.z + x0.w)) + ((x1.x + x1.y) + (x1.z + x1.w));
                        if (row < M) {
                            float *xr = x + (size_t)row * C + n0 + 8 * lane;
                            *(float4 *)xr = x0;
                            *(float4 *)(xr + 4) = x1;
                        }
                    }
                    sm = warp_sum(sm);
                    if (lane == 0) rowv[r0 + i] = sm;
                }
            }
            auto exchange = [&](float v, int e) {
                float *pp = part + (2 * e + b) * CL * BM;
                uint64_t *xbar = &xb[2 * e + b];
                if (t == 0) bar_expect(xbar, CL * BM * 4);
                push_all<CL>(pp + rank * BM + t, xbar, v);
                bar_wait_cluster(xbar, (tl >> 1) & 1);
                float tot = 0.0f;
#pragma unroll
                for (int q = 0; q < CL; q++) tot += pp[q * BM + t];
                return tot;
            };
            asm volatile("bar.sync 1, 128;\n" ::: "memory");
            const float mean_t = exchange(rowv[t], 0) * (1.0f / C);
            asm volatile("bar.sync 1, 128;\n" ::: "memory");
            rowv[t] = mean_t;
            asm volatile("bar.sync 1, 128;\n" ::: "memory");
            for (int r0 = ew * RB; r0 < BM; r0 += 4 * RB) {
                float4 xa_[RB], xb_[RB];
#pragma unroll
                for (int i = 0; i < RB; i++) {
                    const int row = m0 + r0 + i;
                    const float mean = rowv[r0 + i];
                    xa_[i] = xb_[i] = make_float4(mean, mean, mean, mean);
                    if (lane < NCH && row < M) {
                        const float *xr = x + (size_t)row * C + n0 + 8 * lane;
                        xa_[i] = *(const float4 *)xr;
                        xb_[i] = *(const float4 *)(xr + 4);
                    }
                }
#pragma unroll
                for (int i = 0; i < RB; i++) {
                    const float mean = rowv[r0 + i];
                    const float4 x0 = xa_[i], x1 = xb_[i];
                    const float a[8] = {x0.x - mean, x0.y - mean, x0.z - mean, x0.w - mean, x1.x - mean, x1.y - mean, x1.z - mean, x1.w - mean};
                    float sq = lane < NCH ? ((a[0] * a[0] + a[1] * a[1]) + (a[2] * a[2] + a[3] * a[3])) + ((a[4] * a[4] + a[5] * a[5]) + (a[6] * a[6] + a[7] * a[7])) : 0.0f;
                    sq = warp_sum(sq);
                    if (lane == 0) rowq[r0 + i] = sq;
                }
            }
            asm volatile("bar.sync 1, 128;\n" ::: "memory");
            const float rs_t = rsqrtf(exchange(rowq[t], 1) * (1.0f / C) + 1e-5f);
            asm volatile("bar.sync 1, 128;\n" ::: "memory");
            rowq[t] = rs_t;
            asm volatile("bar.sync 1, 128;\n" ::: "memory");
            /* y in the staging tile's place of the row's products, then out by TMA */
            for (int r0 = ew * RB; r0 < BM; r0 += 4 * RB) {
                float4 xa_[RB], xb_[RB];
#pragma unroll
                for (int i = 0; i < RB; i++) {
                    const int row = m0 + r0 + i;
                    xa_[i] = xb_[i] = make_float4(0.f, 0.f, 0.f, 0.f);
                    if (lane < NCH && row < M) {
                        const float *xr = x + (size_t)row * C + n0 + 8 * lane;
                        xa_[i] = *(const float4 *)xr;
                        xb_[i] = *(const float4 *)(xr + 4);
                    }
                }
                if (lane < NCH) {
                    const float4 g0 = *(const float4 *)(gamma + n0 + 8 * lane), g1 = *(const float4 *)(gamma + n0 + 8 * lane + 4);
                    const float4 b0 = *(const float4 *)(beta + n0 + 8 * lane), b1 = *(const float4 *)(beta + n0 + 8 * lane + 4);
#pragma unroll
                    for (int i = 0; i < RB; i++) {
                        const float mean = rowv[r0 + i], rs = rowq[r0 + i];
                        const float4 x0 = xa_[i], x1 = xb_[i];
                        __half2 yv[4];
                        yv[0] = __floats2half2_rn((x0.x - mean) * rs * g0.x + b0.x, (x0.y - mean) * rs * g0.y + b0.y);
                        yv[1] = __floats2half2_rn((x0.z - mean) * rs * g0.z + b0.z, (x0.w - mean) * rs * g0.w + b0.w);
                        yv[2] = __floats2half2_rn((x1.x - mean) * rs * g1.x + b1.x, (x1.y - mean) * rs * g1.y + b1.y);
                        yv[3] = __floats2half2_rn((x1.z - mean) * rs * g1.z + b1.z, (x1.w - mean) * rs * g1.w + b1.w);
                        *(uint4 *)pat(pb, r0 + i, 8 * lane) = *(const uint4 *)yv;
                    }
                }
            }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            asm volatile("bar.sync 1, 128;\n" ::: "memory");
            if (t == 0) {
                for (int h = 0; h < 2; h++)
                    if (m0 + 64 * h < M)
                        for (int q = 0; q < BN / 64; q++) tma2_store(&my, n0 + 64 * q, m0 + 64 * h, pb + h * (64 * BN * 2) + q * (64 * 128));
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
                asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
                bar_arrive(&pempty[b]);
            }
        }
    }
    cluster_sync();
#endif
}

/* The unfused pair it replaces: the residual add and layer norm of rows of C = 768 (one warp a row, 24 elements a
   lane in 16-byte pieces: x in and out fp32, the product in T, y in T), after cuBLASLt's product. */
__global__ void __launch_bounds__(256) resid_ln(float *__restrict__ x, const T *__restrict__ p, const float *__restrict__ gamma,
                                                const float *__restrict__ beta, T *__restrict__ y, int M) {
    constexpr int C = 768;
    const int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= M) return;
    float v[24];
    float *xr = x + (size_t)row * C;
    const T *pr = p + (size_t)row * C;
#pragma unroll
    for (int i = 0; i < 3; i++) { /* elements 8 (lane + 32 i) .. + 7 */
        const int o = 8 * (lane + 32 * i);
        const float4 a = *(const float4 *)(xr + o), b = *(const float4 *)(xr + o + 4);
        const uint4 q = *(const uint4 *)(pr + o);
        const __half2 *h = (const __half2 *)&q;
        v[8 * i + 0] = a.x + __low2float(h[0]); v[8 * i + 1] = a.y + __high2float(h[0]);
        v[8 * i + 2] = a.z + __low2float(h[1]); v[8 * i + 3] = a.w + __high2float(h[1]);
        v[8 * i + 4] = b.x + __low2float(h[2]); v[8 * i + 5] = b.y + __high2float(h[2]);
        v[8 * i + 6] = b.z + __low2float(h[3]); v[8 * i + 7] = b.w + __high2float(h[3]);
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 24; i++) s += v[i];
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float mean = s * (1.0f / C);
    float q2 = 0.0f;
#pragma unroll
    for (int i = 0; i < 24; i++) q2 += (v[i] - mean) * (v[i] - mean);
    for (int o = 16; o; o >>= 1) q2 += __shfl_xor_sync(0xffffffffu, q2, o);
    const float rs = rsqrtf(q2 * (1.0f / C) + 1e-5f);
#pragma unroll
    for (int i = 0; i < 3; i++) {
        const int o = 8 * (lane + 32 * i);
        *(float4 *)(xr + o) = make_float4(v[8 * i], v[8 * i + 1], v[8 * i + 2], v[8 * i + 3]);
        *(float4 *)(xr + o + 4) = make_float4(v[8 * i + 4], v[8 * i + 5], v[8 * i + 6], v[8 * i + 7]);
        __half2 hy[4];
        for (int e = 0; e < 4; e++)
            hy[e] = __floats2half2_rn((v[8 * i + 2 * e] - mean) * rs * gamma[o + 2 * e] + beta[o + 2 * e],
                                      (v[8 * i + 2 * e + 1] - mean) * rs * gamma[o + 2 * e + 1] + beta[o + 2 * e + 1]);
        *(uint4 *)(y + (size_t)row * C + o) = *(const uint4 *)hy;
    }
}

/* cuBLASLt's heuristic pick for D = X W^T + bias (TN, column-major view: D^T [N][M] = W [N][K] . X^T) */
struct Lt {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    void *ws;
    size_t wsb = 32 << 20;
};
static void lt_make(Lt &L, const T *bias, int M, int N, int K) {
    LT(cublasLtCreate(&L.h));
    LT(cublasLtMatmulDescCreate(&L.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(L.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(L.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
    LT(cublasLtMatmulDescSetAttribute(L.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    LT(cublasLtMatmulDescSetAttribute(L.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    LT(cublasLtMatrixLayoutCreate(&L.la, CUDA_R_16F, K, N, K));
    LT(cublasLtMatrixLayoutCreate(&L.lb, CUDA_R_16F, K, M, K));
    LT(cublasLtMatrixLayoutCreate(&L.lc, CUDA_R_16F, N, M, N));
    CK(cudaMalloc(&L.ws, L.wsb));
    cublasLtMatmulPreference_t pr;
    LT(cublasLtMatmulPreferenceCreate(&pr));
    LT(cublasLtMatmulPreferenceSetAttribute(pr, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &L.wsb, sizeof L.wsb));
    cublasLtMatmulHeuristicResult_t r;
    int n = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(L.h, L.op, L.la, L.lb, L.lc, L.lc, pr, 1, &r, &n));
    if (n < 1) { printf("no cuBLASLt algorithm\n"); exit(1); }
    L.algo = r.algo;
    cublasLtMatmulPreferenceDestroy(pr);
}
static void lt_run(Lt &L, const T *W, const T *X, T *D, cudaStream_t s) {
    const float one = 1.0f, zero = 0.0f;
    LT(cublasLtMatmul(L.h, L.op, &one, W, L.la, X, L.lb, &zero, D, L.lc, D, L.lc, &L.algo, L.ws, L.wsb, s));
}
static void lt_free(Lt &L) {
    cublasLtMatrixLayoutDestroy(L.la); cublasLtMatrixLayoutDestroy(L.lb); cublasLtMatrixLayoutDestroy(L.lc);
    cublasLtMatmulDescDestroy(L.op); cublasLtDestroy(L.h); cudaFree(L.ws);
}

typedef CUresult (*enc_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                           const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                           CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static enc_fn encoder() {
    void *f = NULL;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !f) { printf("no cuTensorMapEncodeTiled\n"); exit(1); }
    return (enc_fn)f;
}
/* rows x K, K contiguous, boxes of box_rows x 64 */
static CUtensorMap map2(const T *p, int rows, int K, int box_rows) {
    CUtensorMap m;
    const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)K * 2};
    const cuuint32_t box[2] = {64, (cuuint32_t)box_rows}, one[2] = {1, 1};
    if (encoder()(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, (void *)p, dims, strides, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        printf("tensor map failed\n");
        exit(1);
    }
    return m;
}

__global__ void fill(T *p, size_t n, uint32_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
        p[i] = __float2half(((x & 0xFFFF) / 65535.0f - 0.5f) * scale);
    }
}

template <typename F>
static float time_graph(F launch, cudaStream_t s) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 20; i++) launch();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    CK(cudaGraphLaunch(ge, s));
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (ms < best) best = ms;
    }
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g); cudaEventDestroy(e0); cudaEventDestroy(e1);
    return best * 1000.0f / 20;
}

/* a launch of kern in clusters of CL (threads a block, smem bytes): as many blocks as stay resident at once, cached in
   grid (found on the first call), and no more than units clusters' worth (units: tiles for CL 1) */
struct Launch { cudaLaunchConfig_t cfg; cudaLaunchAttribute at[1]; };
template <typename Kern>
static void setup_launch(Launch &L, Kern kern, int threads, size_t smem, int CL, int sms, int units, cudaStream_t s, int &grid) {
    L.cfg = cudaLaunchConfig_t{};
    L.at[0].id = cudaLaunchAttributeClusterDimension;
    L.at[0].val.clusterDim.x = CL; L.at[0].val.clusterDim.y = 1; L.at[0].val.clusterDim.z = 1;
    L.cfg.blockDim = dim3(threads);
    L.cfg.dynamicSmemBytes = smem;
    L.cfg.stream = s;
    L.cfg.attrs = L.at;
    L.cfg.numAttrs = 1;
    if (!grid) {
        CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        int ncl = sms / CL;
        if (CL > 1) {
            L.cfg.gridDim = dim3(sms / CL * CL);
            CK(cudaOccupancyMaxActiveClusters(&ncl, kern, &L.cfg));
        }
        grid = ncl * CL;
    }
    L.cfg.gridDim = dim3(units * CL < grid ? units * CL : grid);
}

struct Maps { CUtensorMap x, w, d; };
template <int BN, int ST, int CL, int TE>
static void run_ours(const Maps &mp, const T *bias, T *D, int M, int N, int K, int sms, cudaStream_t s, int epi = 1) {
    auto kern = wg_gemm<BN, ST, CL, TE>;
    const size_t smem = (size_t)ST * (BM + BN) * BK * 2 + ((TE == 1 || TE == 2) ? BM * BN * 2 : 0) + 1024 + 2 * ST * 8;
    static int grid = 0;
    const bool first = !grid;
    Launch L;
    setup_launch(L, kern, 384, smem, CL, sms, ((M + BM - 1) / BM + CL - 1) / CL * ((N + BN - 1) / BN), s, grid);
    if (first) printf("[BN %d ST %d CL %d TE %d: %d blocks, %zu B smem] ", BN, ST, CL, (int)TE, grid, smem);
    CK(cudaLaunchKernelEx(&L.cfg, kern, mp.x, mp.w, mp.d, bias, D, M, N, K, epi));
}

template <int ST, int CL>
static void run_pp(const Maps &mp, const T *bias, T *D, int M, int N, int K, int sms, cudaStream_t s, int epi = 1) {
    auto kern = wg_pp<ST, CL>;
    const size_t smem = (size_t)ST * 256 * BK * 2 + 2 * 128 * 128 * 2 + 1024 + 2 * ST * 8 + 16;
    static int grid = 0;
    const bool first = !grid;
    Launch L;
    setup_launch(L, kern, 384, smem, CL, sms, ((M + 127) / 128 + CL - 1) / CL * ((N + 127) / 128), s, grid);
    if (first) printf("[pp ST %d CL %d: %d blocks, %zu B smem] ", ST, CL, grid, smem);
    CK(cudaLaunchKernelEx(&L.cfg, kern, mp.x, mp.w, mp.d, bias, D, M, N, K, epi));
}

/* The kernels timed, by the letter WG_VARIANTS picks (all of them without it). l-p time parts of a kernel: their
   outputs are not the product ("same" 0). */
struct Variant { char key; const char *name; };
static const Variant variants[] = {
    {'a', "coop 128x256, 4 stages, stores from registers"},
    {'b', "coop 128x256, 4 stages, regs, cluster 2 (W multicast)"},
    {'c', "coop 128x256, 3 stages, staging + TMA store"},
    {'d', "coop 128x256, 3 stages, staging + TMA, cluster 2"},
    {'e', "coop 128x192, 4 stages, staging + TMA store"},
    {'f', "coop 128x256, 3 stages, stmatrix + TMA a warpgroup"},
    {'g', "coop 128x256, 3 stages, stmatrix + TMA, cluster 2"},
    {'h', "coop 128x192, 4 stages, stmatrix + TMA a warpgroup"},
    {'i', "coop 128x192, 4 stages, 8-byte stores from registers"},
    {'j', "ping-pong 128x128 a warpgroup, 5 stages"},
    {'k', "ping-pong 128x128, 5 stages, cluster 2"},
    {'l', "(h without its stmatrix writes)"},
    {'m', "(h without its TMA stores)"},
    {'n', "(a's main loop alone: no epilogue)"},
    {'o', "(h's main loop alone: no epilogue)"},
    {'p', "(j's main loop alone: no epilogue)"},
    {0, NULL}};

static void shape(int M, int N, int K, int sms, cudaStream_t s) {
    T *X, *W, *bias, *D0, *D1;
    CK(cudaMalloc(&X, (size_t)M * K * 2)); CK(cudaMalloc(&W, (size_t)N * K * 2)); CK(cudaMalloc(&bias, (size_t)N * 2));
    CK(cudaMalloc(&D0, (size_t)M * N * 2)); CK(cudaMalloc(&D1, (size_t)M * N * 2));
    fill<<<1024, 256, 0, s>>>(X, (size_t)M * K, 1, 2.0f);
    fill<<<1024, 256, 0, s>>>(W, (size_t)N * K, 2, 0.1f);
    fill<<<64, 256, 0, s>>>(bias, (size_t)N, 3, 0.2f);
    Lt L;
    lt_make(L, bias, M, N, K);
    const double fl = 2.0 * M * N * K;
    const float tl = getenv("WG_PROF") ? (lt_run(L, W, X, D0, s), 1.0f) : time_graph([&] { lt_run(L, W, X, D0, s); }, s);
    printf("M %5d N %5d K %5d  cuBLASLt %8.2f us %6.1f TFLOP/s", M, N, K, tl, fl / tl * 1e-6);
    const CUtensorMap mx = map2(X, M, K, BM), md = map2(D1, M, N, 128);
    const Maps m256 = {mx, map2(W, N, K, 256), md}, m256c = {mx, map2(W, N, K, 128), md}, m128c = {mx, map2(W, N, K, 64), md}, m128 = {mx, map2(W, N, K, 128), md}, m192 = {mx, map2(W, N, K, 192), md},
                    m192c = {mx, map2(W, N, K, 96), md};
    const CUtensorMap md64 = map2(D1, M, N, 64);
    const Maps s256 = {mx, map2(W, N, K, 256), md64}, s256c = {mx, map2(W, N, K, 128), md64}, s192 = {mx, map2(W, N, K, 192), md64};
    std::vector<T> h0((size_t)M * N), h1((size_t)M * N);
    CK(cudaMemcpyAsync(h0.data(), D0, h0.size() * 2, cudaMemcpyDeviceToHost, s));
    const char *sel = getenv("WG_VARIANTS"), *prof = getenv("WG_PROF");
    for (const Variant *vp = variants; vp->key; vp++) {
        const char key = vp->key;
        if (sel && !strchr(sel, key)) continue;
        auto go = [&] {
            switch (key) {
            case 'a': run_ours<256, 4, 1, 0>(m256, bias, D1, M, N, K, sms, s); break;
            case 'b': run_ours<256, 4, 2, 0>(m256c, bias, D1, M, N, K, sms, s); break;
            case 'c': run_ours<256, 3, 1, 1>(m256, bias, D1, M, N, K, sms, s); break;
            case 'd': run_ours<256, 3, 2, 1>(m256c, bias, D1, M, N, K, sms, s); break;
            case 'e': run_ours<192, 4, 1, 1>(m192, bias, D1, M, N, K, sms, s); break;
            case 'f': run_ours<256, 3, 1, 2>(s256, bias, D1, M, N, K, sms, s); break;
            case 'g': run_ours<256, 3, 2, 2>(s256c, bias, D1, M, N, K, sms, s); break;
            case 'h': run_ours<192, 4, 1, 2>(s192, bias, D1, M, N, K, sms, s); break;
            case 'i': run_ours<192, 4, 1, 3>(m192, bias, D1, M, N, K, sms, s); break;
            case 'j': run_pp<5, 1>(m128, bias, D1, M, N, K, sms, s); break;
            case 'k': run_pp<5, 2>(m128c, bias, D1, M, N, K, sms, s); break;
            case 'l': run_ours<192, 4, 1, 2>(s192, bias, D1, M, N, K, sms, s, 2); break;
            case 'm': run_ours<192, 4, 1, 2>(s192, bias, D1, M, N, K, sms, s, 3); break;
            case 'n': run_ours<256, 4, 1, 0>(m256, bias, D1, M, N, K, sms, s, 0); break;
            case 'o': run_ours<192, 4, 1, 0>(m192, bias, D1, M, N, K, sms, s, 0); break;
            default: run_pp<5, 1>(m128, bias, D1, M, N, K, sms, s, 0); break;
            }
        };
        CK(cudaMemsetAsync(D1, 0, (size_t)M * N * 2, s));
        go();
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(h1.data(), D1, h1.size() * 2, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        double worst = 0;
        size_t same = 0;
        for (size_t i = 0; i < h0.size(); i++) {
            const float a = __half2float(h0[i]), b = __half2float(h1[i]);
            const double e = fabs((double)a - b) / (1.0 + fabs(a));
            if (!(e <= worst)) worst = e;
            same += memcmp(&h0[i], &h1[i], 2) == 0;
        }
        if (prof) continue;
        const float to = time_graph(go, s);
        printf("\n    %c %-52s %8.2f us %6.1f TFLOP/s (%.3fx) err %.1e same %.4f", key, vp->name, to, fl / to * 1e-6, tl / to, worst,
               (double)same / h0.size());
    }
    printf("\n");
    lt_free(L);
    cudaFree(X); cudaFree(W); cudaFree(bias); cudaFree(D0); cudaFree(D1);
}

__global__ void fillf(float *p, size_t n, uint32_t seed, float base, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
        p[i] = base + ((x & 0xFFFF) / 65535.0f - 0.5f) * scale;
    }
}

static void compare_and_time(int M, int K, int C, const char *what, int ncl, int CL, cudaStream_t s, Lt &L, const T *W, const T *X, T *P,
                             float *xa, float *xb, const float *x0, T *ya, T *yb, const float *gamma, const float *beta,
                             const std::function<void(float *)> &fused);
static void lnp_run(int M, int K, int sms, cudaStream_t s, const CUtensorMap &mx, const CUtensorMap &mw, const CUtensorMap &my,
                    const CUtensorMap &mxs, const T *bias, const T *X, const T *W, T *P, float *xa, float *xb, const float *x0, T *ya,
                    T *yb, const float *gamma, const float *beta, Lt &L) {
    constexpr int C = 768, BN = 192, ST = 3, CL = 4;
    auto kern = wg_lnp<BN, ST, CL>;
    const size_t smem = (size_t)ST * (64 + BN) * BK * 2 + 2 * 64 * BN * 4 + 1024 + (2 * ST + 14) * 8 + 2 * 4 * CL * 64 * 4;
    int grid = 0;
    Launch launch;
    setup_launch(launch, kern, 384, smem, CL, sms, (M + 63) / 64, s, grid);
    cudaLaunchConfig_t &cfg = launch.cfg;
    compare_and_time(M, K, C, " (ping-pong, x by TMA)", cfg.gridDim.x / CL, CL, s, L, W, X, P, xa, xb, x0, ya, yb, gamma, beta, [&](float *x) {
        (void)x;
        CK(cudaLaunchKernelEx(&cfg, kern, mx, mw, my, mxs, bias, gamma, beta, M, K));
    });
}

static void lne_run(int M, int K, int sms, cudaStream_t s, const CUtensorMap &mx, const CUtensorMap &mw, const CUtensorMap &my,
                    const T *bias, const T *X, const T *W, T *P, float *xa, float *xb, const float *x0, T *ya, T *yb,
                    const float *gamma, const float *beta, Lt &L) {
    constexpr int C = 768, BN = 192, ST = 3, CL = 4;
    auto kern = wg_lne<BN, ST, CL>;
    const size_t smem = (size_t)ST * (BM + BN) * BK * 2 + 2 * BM * BN * 2 + 1024 + (2 * ST + 8) * 8 + (4 * CL + 2) * BM * 4;
    int grid = 0;
    Launch launch;
    setup_launch(launch, kern, 512, smem, CL, sms, (M + BM - 1) / BM, s, grid);
    cudaLaunchConfig_t &cfg = launch.cfg;
    compare_and_time(M, K, C, " (an epilogue warpgroup)", cfg.gridDim.x / CL, CL, s, L, W, X, P, xa, xb, x0, ya, yb, gamma, beta,
                     [&](float *x) { CK(cudaLaunchKernelEx(&cfg, kern, mx, mw, my, bias, x, gamma, beta, M, K)); });
}

/* the fused product + residual + layer norm (C 768: 4 blocks of 192) against cuBLASLt's product + resid_ln */
static void ln_shape(int M, int K, int sms, cudaStream_t s) {
    constexpr int C = 768, BN = 192, ST = 4, CL = 4;
    T *X, *W, *bias, *P, *ya, *yb;
    float *x0, *xa, *xb, *gamma, *beta;
    CK(cudaMalloc(&X, (size_t)M * K * 2)); CK(cudaMalloc(&W, (size_t)C * K * 2)); CK(cudaMalloc(&bias, C * 2));
    CK(cudaMalloc(&P, (size_t)M * C * 2)); CK(cudaMalloc(&ya, (size_t)M * C * 2)); CK(cudaMalloc(&yb, (size_t)M * C * 2));
    CK(cudaMalloc(&x0, (size_t)M * C * 4)); CK(cudaMalloc(&xa, (size_t)M * C * 4)); CK(cudaMalloc(&xb, (size_t)M * C * 4));
    CK(cudaMalloc(&gamma, C * 4)); CK(cudaMalloc(&beta, C * 4));
    fill<<<1024, 256, 0, s>>>(X, (size_t)M * K, 1, 2.0f);
    fill<<<1024, 256, 0, s>>>(W, (size_t)C * K, 2, 0.1f);
    fill<<<64, 256, 0, s>>>(bias, C, 3, 0.2f);
    fillf<<<1024, 256, 0, s>>>(x0, (size_t)M * C, 4, 0.0f, 4.0f);
    fillf<<<4, 256, 0, s>>>(gamma, C, 5, 1.0f, 0.4f);
    fillf<<<4, 256, 0, s>>>(beta, C, 6, 0.0f, 0.4f);
    Lt L;
    lt_make(L, bias, M, C, K);
    const CUtensorMap mx = map2(X, M, K, BM), mw = map2(W, C, K, BN), my = map2(yb, M, C, 64);
    CUtensorMap mxs; /* x [M][C] fp32 in boxes of 32 x 128, 128-byte swizzle */
    {
        const cuuint64_t dims[2] = {(cuuint64_t)C, (cuuint64_t)M}, strides[1] = {(cuuint64_t)C * 4};
        const cuuint32_t box[2] = {32, 128}, one[2] = {1, 1};
        if (encoder()(&mxs, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)xb, dims, strides, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            printf("tensor map failed\n");
            exit(1);
        }
    }
    const int xtm = getenv("WG_XT") ? atoi(getenv("WG_XT")) : 0;
    const bool xt = xtm == 1;
    if (xtm == 4) { /* an epilogue warpgroup */
        lne_run(M, K, sms, s, mx, mw, map2(yb, M, C, 64), bias, X, W, P, xa, xb, x0, ya, yb, gamma, beta, L);
        lt_free(L);
        cudaFree(X); cudaFree(W); cudaFree(bias); cudaFree(P); cudaFree(ya); cudaFree(yb);
        cudaFree(x0); cudaFree(xa); cudaFree(xb); cudaFree(gamma); cudaFree(beta);
        return;
    }
    if (xtm == 2) { /* ping-pong */
        CUtensorMap mx64 = map2(X, M, K, 64), my64 = map2(yb, M, C, 64), mxs64;
        const cuuint64_t dims[2] = {(cuuint64_t)C, (cuuint64_t)M}, strides[1] = {(cuuint64_t)C * 4};
        const cuuint32_t box[2] = {32, 64}, one[2] = {1, 1};
        if (encoder()(&mxs64, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, (void *)xb, dims, strides, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            printf("tensor map failed\n");
            exit(1);
        }
        lnp_run(M, K, sms, s, mx64, mw, my64, mxs64, bias, X, W, P, xa, xb, x0, ya, yb, gamma, beta, L);
        lt_free(L);
        cudaFree(X); cudaFree(W); cudaFree(bias); cudaFree(P); cudaFree(ya); cudaFree(yb);
        cudaFree(x0); cudaFree(xa); cudaFree(xb); cudaFree(gamma); cudaFree(beta);
        return;
    }
    auto kern = xt ? wg_ln<BN, 3, CL, true> : wg_ln<BN, ST, CL, false>;
    const size_t smem = (size_t)(xt ? 3 : ST) * (BM + BN) * BK * 2 + BM * BN * (xt ? 4 : 2) + 1024 + (2 * ST + 6) * 8 + 4 * CL * BM * 4;
    int grid = 0;
    Launch launch;
    setup_launch(launch, kern, 384, smem, CL, sms, (M + BM - 1) / BM, s, grid);
    cudaLaunchConfig_t &cfg = launch.cfg;
    const int skip = getenv("WG_SKIP") ? atoi(getenv("WG_SKIP")) : 0; /* timing only: parts of the epilogue left out */
    auto fused = [&](float *x) { CK(cudaLaunchKernelEx(&cfg, kern, mx, mw, my, mxs, (const T *)bias, x, (const float *)gamma, (const float *)beta, M, K, skip)); };
    char what[96];
    snprintf(what, sizeof what, "%s%s", xt ? " (x by TMA)" : "", skip ? " (timing only: parts left out)" : "");
    compare_and_time(M, K, C, what, cfg.gridDim.x / CL, CL, s, L, W, X, P, xa, xb, x0, ya, yb, gamma, beta, fused);
    lt_free(L);
    cudaFree(X); cudaFree(W); cudaFree(bias); cudaFree(P); cudaFree(ya); cudaFree(yb);
    cudaFree(x0); cudaFree(xa); cudaFree(xb); cudaFree(gamma); cudaFree(beta);
}

/* x0 -> xa by cuBLASLt's product + resid_ln, x0 -> xb by the fused kernel (fused(xb) launches it); prints the
   differences and the times */
static void compare_and_time(int M, int K, int C, const char *what, int ncl, int CL, cudaStream_t s, Lt &L, const T *W, const T *X, T *P,
                             float *xa, float *xb, const float *x0, T *ya, T *yb, const float *gamma, const float *beta,
                             const std::function<void(float *)> &fused) {
    auto unfused = [&](float *x, T *y) {
        lt_run(L, W, X, P, s);
        resid_ln<<<(M + 7) / 8, 256, 0, s>>>(x, P, gamma, beta, y, M);
    };
    CK(cudaMemcpyAsync(xa, x0, (size_t)M * C * 4, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(xb, x0, (size_t)M * C * 4, cudaMemcpyDeviceToDevice, s));
    unfused(xa, ya);
    fused(xb);
    CK(cudaGetLastError());
    std::vector<float> ha((size_t)M * C), hb((size_t)M * C);
    std::vector<T> yha((size_t)M * C), yhb((size_t)M * C);
    CK(cudaMemcpyAsync(ha.data(), xa, ha.size() * 4, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(hb.data(), xb, hb.size() * 4, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(yha.data(), ya, yha.size() * 2, cudaMemcpyDeviceToHost, s));
    CK(cudaMemcpyAsync(yhb.data(), yb, yhb.size() * 2, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    double ex = 0, ey = 0;
    size_t sx = 0, sy = 0;
    for (size_t i = 0; i < ha.size(); i++) {
        const double e1 = fabs((double)ha[i] - hb[i]) / (1.0 + fabs(ha[i]));
        const double e2 = fabs((double)__half2float(yha[i]) - __half2float(yhb[i]));
        if (!(e1 <= ex)) ex = e1;
        if (!(e2 <= ey)) ey = e2;
        sx += ha[i] == hb[i];
        sy += memcmp(&yha[i], &yhb[i], 2) == 0;
    }
    const float t_lt = time_graph([&] { lt_run(L, W, X, P, s); }, s);
    const float t_ln = time_graph([&] { resid_ln<<<(M + 7) / 8, 256, 0, s>>>(xa, P, gamma, beta, ya, M); }, s);
    const float t_un = time_graph([&] { unfused(xa, ya); }, s);
    const float t_fu = time_graph([&] { fused(xb); }, s);
    const double fl = 2.0 * M * C * K, ln_bytes = (double)M * C * 12;
    printf("fused product + residual + LN%s, M %d C %d K %d (%d clusters of %d):\n", what, M, C, K, ncl, CL);
    printf("  cuBLASLt product %8.2f us (%.1f TFLOP/s) | resid_ln %8.2f us (%.2f TB/s) | both %8.2f us | fused %8.2f us (%.3fx)\n", t_lt,
           fl / t_lt * 1e-6, t_ln, ln_bytes / t_ln * 1e-6, t_un, t_fu, t_un / t_fu);
    printf("  x: largest |diff| / (1 + |x|) %.1e, identical %.4f; y: largest |diff| %.1e, identical %.4f\n", ex, (double)sx / ha.size(), ey,
           (double)sy / ha.size());
}

int main(int argc, char **argv) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("%s, %d SMs\n", p.name, sms);
    if (argc > 1 && !strcmp(argv[1], "ln")) {
        for (int i = 2; i + 1 < argc; i += 2) ln_shape(atoi(argv[i]), atoi(argv[i + 1]), sms, s);
        return 0;
    }
    if (argc > 1) {
        for (int i = 1; i + 2 < argc; i += 3) shape(atoi(argv[i]), atoi(argv[i + 1]), atoi(argv[i + 2]), sms, s);
        return 0;
    }
    const int shapes[][3] = {{16384, 2304, 768}, {16384, 768, 768}, {16384, 3072, 768}, {16384, 768, 3072},
                             {4096, 4800, 1600}, {4096, 1600, 1600}, {4096, 6400, 1600}, {4096, 1600, 6400},
                             {256, 4800, 1600}, {256, 1600, 1600}, {256, 6400, 1600}, {256, 1600, 6400}};
    for (auto &sh : shapes) shape(sh[0], sh[1], sh[2], sms, s);
    return 0;
}
