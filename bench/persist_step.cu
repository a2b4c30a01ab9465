/* Would a batch-1 decode step as ONE persistent kernel reach the latency targets? A model of it, not an engine
   (RESULTS.md item 171).

   gpt2.cuh runs a batch-1 step as 64 (124M) or 244 (1558M) kernels chained by programmatic dependent launch. Each
   product streams only its own weights, once its blocks are resident, so the weight stream stalls at every kernel
   boundary (RESULTS.md items 47, 141). Item 41 weighed a persistent kernel by its grid barrier alone (1.36 us against
   0.60 us for a boundary) and dropped it; what that left out is that in one kernel the weights need wait for no
   barrier. Here one block per SM runs the whole step: warp NWC of each block (the producer) streams the block's share
   of every product's weights, in the order the block uses them, through a ring of shared-memory stages (TMA boxes of
   8 rows x 64 of K, 128-byte swizzle, onto transaction barriers, L2 evict-first), never waiting for activations; the
   other NWC warps (consumers) wait at grid barriers for the activations and run the MMA chains over the stages.

   Per step, as gpt2.cuh's batch-1 step computes it (the same chains; GPT-2's shapes with random weights):
     layer l: LN(x + pieces + bias) -> qkv [3C][C]   (bias, T out)                     barrier
              attention, MODELLED: blocks 0..H-1 read their head's q, k, v, spin ATT_NS ns, write a T row  barrier
              proj [C][C] in PP pieces of K (fp32 pieces out)                         barrier
              LN(x + pieces + bias) -> fc [4C][C] (bias, GELU, T out)                 barrier
              fc2 [C][4C] in 4 pieces of K (fp32 pieces out)                          barrier
     LN(x + pieces + bias) -> logits [V][C] (fp32; each block's largest as a candidate) barrier
     argmax over the blocks' candidates by block 0                                     barrier
   Block 0 writes each updated residual row (ping-pong). Work unit: 8 output columns of one K piece, an m16n8k16
   chain over the piece's K in 16-wide slices in order (what gpt2__skinny_kernel and cuBLASLt's pinned class do);
   unit u goes to block u % G, the block's units in rounds of NWC (warp w takes the round's w-th). Not modelled:
   the attention's own K/V reads (1.2 MB a layer at 1558M, position 192), the embedding, the sampler's other modes;
   no bit-for-bit claim against gpt2.cuh. `persist_step check` compares one layer's logits with a CPU computation of
   the same arithmetic (C 256 and 768).

   Modes (bits, PS_RUNS="att_ns:mode,..."): 0 the step; 1 the weights not streamed (chains over whatever the ring
   holds: the consumers' path alone); 2 no grid barriers; 4 flag barriers (a word per block) instead of one counter;
   16 no MMAs (with 2: the weight stream alone); 128 every chunk's MMAs twice (the chain's own cost); 256 the operands
   loaded once (what their loads cost); 512 no __syncwarp per chunk. Each run prints ms a step (median of 5 launches
   of 20 steps) and, from clock64 stamps of blocks 0 and G - 1 in a further launch, each kind of op's mean time to its
   input (LN or X), through its chains and epilogue, and in its barrier.

   Usage: persist_step [check | C L H V [PP [ATT_NS]]]   (no arguments: 124M and 1558M, the runs of PS_RUNS or its
   default list). Build: make bench/persist_step (sm_90a only: TMA, mbarriers). */
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <array>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cuda.h>
#include "grid_barrier.cuh"
#include <cstring>
#include <string>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int KC = 128;                 /* K a stage holds per row */
#ifndef PS_NWC
#define PS_NWC 7
#endif
constexpr int NWC = PS_NWC;             /* consumer warps; warp NWC is the producer */
constexpr int NTC = 32 * NWC;
constexpr int UNIT_B = 8 * KC * 2;      /* a unit's 8 rows of a chunk: two TMA boxes of 8 x 64, 128-byte swizzled */
constexpr int STAGE = NWC * UNIT_B / 2; /* halves a stage */
constexpr int LNV = (2048 + NTC - 1) / NTC; /* LN elements a consumer thread: widths up to 2048 */
constexpr int XV = 1024 / NTC;          /* 16-byte X pieces a consumer thread: widths up to 8192 */

enum { OP_QKV, OP_ATT, OP_PROJ, OP_FC, OP_FC2, OP_LOGITS, OP_ARGMAX };
struct Op {
    int kind;
    const __half *W;                    /* [O][I] */
    const __half *bias;                 /* this product's bias (T out), or the bias the LN's input adds (fp32 out) */
    int O, I, pieces;
    const __half *in_bias;              /* LN ops: the bias added to x + pieces before the LN */
    int in_pieces;                      /* LN ops: the pieces to add (0: none) */
    const CUtensorMap *map;             /* W as {Ik, pieces, O}, box {64, 1, 8}, 128-byte swizzle */
};
struct Bufs {
    float *x[2];                        /* residual row, ping-pong */
    float *part;                        /* [4][max O] fp32 pieces */
    __half *qkv, *att, *fc;
    float *logits;
    int *token;
    unsigned *ctr, *flags;              /* the counter barrier's word; the flag barrier's words [G] */
    float2 *cand;                       /* [G] each block's largest logit and its column */
    const float *g, *b;                 /* LN gain and shift (one for all) */
};

__device__ __forceinline__ void cbar() { asm volatile("bar.sync 1, %0;" ::"n"(NTC) : "memory"); }
/* every consumer thread of every block has arrived (grid_barrier.cuh's, among the consumer warps only) */
__device__ __forceinline__ void grid_barrier(unsigned *ctr, bool skip) {
    cbar();
    if (skip) return;
    if (threadIdx.x == 0) grid_arrive_wait(ctr);
    cbar();
}
__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t *b, unsigned n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n)); }
__device__ __forceinline__ void mbar_expect(uint64_t *b, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory"); }
__device__ __forceinline__ void mbar_wait(uint64_t *b, unsigned parity) {
    asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}" ::"r"(sa(b)), "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void tma3(void *dst, const CUtensorMap *map, int x, int y, int z, uint64_t *bar, uint64_t pol) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(sa(dst)), "l"((uint64_t)map), "r"(x), "r"(y), "r"(z), "r"(sa(bar)), "l"(pol)
                 : "memory");
}
__device__ __forceinline__ uint64_t evict_first() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
/* loads of what other blocks wrote in this launch, from L2, kept in program order (an __ldcg of a loop-invariant
   address was hoisted out of the op loop, unguarded) */
__device__ __forceinline__ float ldv(const float *p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ float ldvh(const __half *p) {
    unsigned short v;
    asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
    return __half2float(__ushort_as_half(v));
}
__device__ __forceinline__ uint4 ldv4(const void *p) {
    uint4 v;
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}
/* one m16n8k16 step whose A rows are all the same row: lo = its K 2t.., hi = its K 8 + 2t.. */
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t lo, uint32_t hi, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(lo), "r"(lo), "r"(hi), "r"(hi), "r"(b0), "r"(b1));
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float csum(float v, float *sh) { /* over the consumer threads */
    v = warp_sum(v);
    cbar();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    cbar();
    float t = 0.0f;
    for (int i = 0; i < NWC; i++) t += sh[i];
    return t;
}

/* the consumers' largest (v, i) pair (lowest i among ties): each warp's into red / redi, then the index of the best
   warp's, which every consumer thread gets */
__device__ __forceinline__ int block_best(float v, int i, float *red, int *redi) {
    for (int o = 16; o; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, i, o);
        if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
    }
    if ((threadIdx.x & 31) == 0) { red[threadIdx.x >> 5] = v; redi[threadIdx.x >> 5] = i; }
    cbar();
    int k = 0;
    for (int w = 1; w < NWC; w++)
        if (red[w] > red[k] || (red[w] == red[k] && redi[w] < redi[k])) k = w;
    return k;
}

/* the units of op for block b of G: u = b + G j; rounds of NWC */
__device__ __forceinline__ int units(const Op &op) { return (op.O + 7) / 8 * op.pieces; }
__device__ __forceinline__ int rounds(const Op &op, int b, int G) {
    const int U = units(op), mine = U > b ? (U - b + G - 1) / G : 0;
    return (mine + NWC - 1) / NWC;
}

/* mode bits: 1 the weights not streamed (chains on whatever the ring holds), 2 no grid barriers, 4 flag barriers
   (each block stores its epoch in a word of its own; 132 threads wait on one word each) instead of one counter */
__global__ void __launch_bounds__(32 * (NWC + 1), 1) step_kernel(const Op *__restrict__ ops_g, int n_ops, Bufs B, int steps,
                                                                 int ns, int att_ns, int H, int mode, long long *trace) {
    extern __shared__ __align__(128) unsigned char sh_raw[];
    unsigned char *sh = sh_raw + ((1024 - (sa(sh_raw) & 1023)) & 1023); /* the swizzled boxes want 1024-byte alignment */
    __half *ring = (__half *)sh;
    uint64_t *full = (uint64_t *)(sh + (size_t)ns * STAGE * 2), *empty = full + ns;
    /* the product's input row (up to 8192 wide) as the MMAs' A operands: slice j (16 of K), lane quad t: 8 bytes at
       (4 j + t) 8, the words {x[16 j + 2 t..], x[16 j + 8 + 2 t..]} (one 8-byte load a slice; rows 8..15 repeat row 0) */
    __half *Xq = (__half *)(empty + ns);
    Op *ops = (Op *)(Xq + 8192);            /* the op list, copied once */
    __shared__ float red[NWC];
    __shared__ int redi[NWC];
    const int G = gridDim.x, b = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int i = threadIdx.x; i < n_ops * (int)(sizeof(Op) / 8); i += blockDim.x) ((uint64_t *)ops)[i] = ((const uint64_t *)ops_g)[i];
    if (threadIdx.x == 0) {
        for (int i = 0; i < ns; i++) { mbar_init(full + i, 1); mbar_init(empty + i, NWC); }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == NWC && (mode & 1)) return;
    if (warp == NWC) { /* the producer: every stage of every op of every step, in the consumers' order */
        const uint64_t pol = evict_first();
        unsigned slot = 0, eph = 0;
        bool wrapped = false;
        for (int st = 0; st < steps; st++)
            for (int oi = 0; oi < n_ops; oi++) {
                const Op &op = ops[oi];
                if (op.kind == OP_ATT || op.kind == OP_ARGMAX) continue;
                const int R = rounds(op, b, G), U = units(op), G8 = (op.O + 7) / 8, Ik = op.I / op.pieces, nch = (Ik + KC - 1) / KC;
                for (int r = 0; r < R; r++)
                    for (int c = 0; c < nch; c++) {
                        const int kc = min(KC, Ik - c * KC);
                        if (wrapped) mbar_wait(empty + slot, eph);
                        bool ok = false;
                        int u = 0;
                        if (lane < NWC) { u = b + G * (r * NWC + lane); ok = u < U; }
                        const int nb = kc > 64 ? 2 : 1, units_here = __popc(__ballot_sync(0xffffffffu, ok));
                        if (lane == 0) mbar_expect(full + slot, (unsigned)(units_here * nb * UNIT_B / 2));
                        __syncwarp();
                        if (ok)
                            for (int h = 0; h < nb; h++)
                                tma3((char *)(ring + (size_t)slot * STAGE) + lane * UNIT_B + h * (UNIT_B / 2), op.map, c * KC + 64 * h,
                                     u / G8, (u % G8) * 8, full + slot, pol);
                        if (++slot == (unsigned)ns) {
                            slot = 0;
                            if (wrapped) eph ^= 1;
                            wrapped = true;
                        }
                    }
            }
        return;
    }
    /* the consumers; thread 0 of blocks 0 and G - 1 stamp each op's phases in the last step (trace: [2][n_ops][4]) */
    const int g = lane >> 2, t = lane & 3;
#define STAMP(ph) do { if (trace && threadIdx.x == 0 && st == steps - 1 && (b == 0 || b == G - 1)) \
                         { trace[((b ? 1 : 0) * n_ops + oi) * 8 + (ph)] = clock64(); \
                           unsigned long long gt_; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt_)); \
                           trace[((b ? 1 : 0) * n_ops + oi) * 8 + 4 + (ph)] = (long long)gt_; } } while (0)
    unsigned cslot = 0, cph = 0, epoch = 0;
    int xi = 0;
    /* this lane's ldmatrix offset in a unit's slot for slices j, j + 1 (j even): matrix m = lane / 8 is K 16 j + 8 m,
       row lane % 8 (box K / 64, its 16-byte piece swizzled by the row); woff[p] for j = 2p, in registers */
    const int r8 = lane & 7, m8 = lane >> 3;
    auto woffj = [&](int j) {
        const int kk = 16 * j + 8 * m8;
        return (uint32_t)((kk >> 6) * (UNIT_B / 2) + r8 * 128 + ((((kk & 63) >> 3) ^ r8) << 4));
    };
    uint32_t woff[KC / 32];
#pragma unroll
    for (int p = 0; p < KC / 32; p++) woff[p] = woffj(2 * p);
    auto barrier = [&]() {
        if (mode & 2) { cbar(); return; }
        if (!(mode & 4)) { grid_barrier(B.ctr, false); return; }
        epoch++;
        cbar();
        if (threadIdx.x == 0) {
            __threadfence();
            asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(B.flags + b), "r"(epoch) : "memory");
        }
        if (threadIdx.x < G)
            while ((int)(ld_acquire(B.flags + threadIdx.x) - epoch) < 0) {}
        cbar();
    };
    /* the LN's constants of an op (gain, shift, the bias its input adds), loaded before the barrier that precedes it */
    float pg[LNV], pb[LNV], pbi[LNV];
#define LN_CONSTS(nx)                                                                                                        \
    do {                                                                                                                   \
        if ((nx).kind == OP_QKV || (nx).kind == OP_FC || (nx).kind == OP_LOGITS) {                                         \
            _Pragma("unroll") for (int k_ = 0; k_ < LNV; k_++) {                                                           \
                const int i_ = threadIdx.x + NTC * k_, ii_ = i_ < (nx).I ? i_ : 0;                                          \
                pg[k_] = B.g[ii_]; pb[k_] = B.b[ii_];                                                                      \
                pbi[k_] = (nx).in_pieces ? __half2float((nx).in_bias[ii_]) : 0.0f;                                        \
            }                                                                                                              \
        }                                                                                                                  \
    } while (0)
    {
        const int st = 0, oi = 0;
        (void)st; (void)oi;
        LN_CONSTS(ops[0]);
    }
    for (int st = 0; st < steps; st++)
        for (int oi = 0; oi < n_ops; oi++) {
            const Op &op = ops[oi];
            const Op &nx = ops[oi + 1 < n_ops ? oi + 1 : 0];
            STAMP(0);
            if (op.kind == OP_ATT) {
                if (b < H && threadIdx.x < 64) {
                    const int C = op.O;
                    const float q = ldvh(B.qkv + b * 64 + threadIdx.x), k = ldvh(B.qkv + C + b * 64 + threadIdx.x);
                    const float v = ldvh(B.qkv + 2 * C + b * 64 + threadIdx.x);
                    const long long t0 = clock64(), dt = (mode & 2) ? 0 : (long long)att_ns * 198 / 100; /* ~1.98 GHz */
                    while (clock64() - t0 < dt) {}
                    B.att[b * 64 + threadIdx.x] = __float2half(q * k * 0.125f + v);
                }
                STAMP(1); STAMP(2);
                LN_CONSTS(nx);
                barrier();
                STAMP(3);
                continue;
            }
            if (op.kind == OP_ARGMAX) { /* block 0 over the blocks' candidates */
                if (b == 0) {
                    float best = -INFINITY;
                    int bi = 0x7fffffff;
                    if (threadIdx.x < G) { best = ldv(&B.cand[threadIdx.x].x); bi = __float_as_int(ldv(&B.cand[threadIdx.x].y)); }
                    const int k = block_best(best, bi, red, redi);
                    if (threadIdx.x == 0) *B.token = redi[k];
                    cbar();
                }
                STAMP(1); STAMP(2);
                LN_CONSTS(nx);
                barrier();
                STAMP(3);
                continue;
            }
            const int Iw = op.I;
            if (op.kind == OP_QKV || op.kind == OP_FC || op.kind == OP_LOGITS) {
                /* X = LN(x + pieces + in_bias); block 0 keeps the sum as the new residual row */
                const float *__restrict__ x = B.x[xi];
                const float *__restrict__ pt = B.part;
                float *__restrict__ xo = B.x[xi ^ 1];
                float sum = 0.0f, ss = 0.0f;
                float v[LNV], pv[4][LNV];
                /* every load of the row first (one round trip), then the adds, then block 0's store */
#pragma unroll
                for (int k = 0; k < LNV; k++) {
                    const int i = threadIdx.x + NTC * k, ii = i < Iw ? i : 0;
                    v[k] = ldv(x + ii);
#pragma unroll
                    for (int p = 0; p < 4; p++) pv[p][k] = p < op.in_pieces ? ldv(pt + p * Iw + ii) : 0.0f;
                }
#pragma unroll
                for (int k = 0; k < LNV; k++) {
                    const int i = threadIdx.x + NTC * k;
                    if (i >= Iw) { v[k] = 0.0f; continue; }
                    v[k] = (((v[k] + pv[0][k]) + pv[1][k]) + (pv[2][k] + pv[3][k])) + pbi[k];
                    sum += v[k];
                    if (b == 0) xo[i] = v[k];
                }
                const float mean = csum(sum, red) / Iw;
#pragma unroll
                for (int k = 0; k < LNV; k++)
                    if (threadIdx.x + NTC * k < Iw) ss += (v[k] - mean) * (v[k] - mean);
                const float rstd = rsqrtf(csum(ss, red) / Iw + 1e-5f);
#pragma unroll
                for (int k = 0; k < LNV; k++) {
                    const int i = threadIdx.x + NTC * k;
                    if (i < Iw) {
                        const __half y = __float2half((v[k] - mean) * rstd * pg[k] + pb[k]);
                        const int r = i & 15;
                        Xq[((((i >> 4) * 4 + ((r & 7) >> 1)) * 2 + (r >> 3)) * 2) + (r & 1)] = y;
                    }
                }
                if (op.in_pieces) xi ^= 1;
            } else {
                const __half *src = op.kind == OP_PROJ ? B.att : B.fc;
                uint4 t4[XV];
#pragma unroll
                for (int j = 0; j < XV; j++) {
                    const int i = threadIdx.x + NTC * j;
                    if (i < Iw / 8) t4[j] = ldv4((const uint4 *)src + i);
                }
#pragma unroll
                for (int j = 0; j < XV; j++) {
                    const int i = threadIdx.x + NTC * j;
                    if (i < Iw / 8) { /* elements 8 i..: slice i / 2, its half i % 2, quads t = 0..3 */
                        uint32_t *q = (uint32_t *)Xq + (i >> 1) * 8 + (i & 1);
                        q[0] = t4[j].x; q[2] = t4[j].y; q[4] = t4[j].z; q[6] = t4[j].w;
                    }
                }
            }
            cbar();
            STAMP(1);
            const int R = rounds(op, b, G), U = units(op), G8 = (op.O + 7) / 8, Ik = op.I / op.pieces;
            float cbest = -INFINITY; /* logits: this warp's largest and its column (lowest among ties) */
            int cidx = 0x7fffffff;
            for (int r = 0; r < R; r++) {
                const int u = b + G * (r * NWC + warp), piece = u / G8, grp = u % G8;
                const bool act = u < U, comp = act && !(mode & 16);
                float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                const uint32_t xq0 = sa(Xq) + (uint32_t)((((piece * Ik) >> 4) * 4 + t) * 8), wl = sa(ring) + warp * UNIT_B;
                const int nfull = Ik / KC;
                uint32_t A0[KC / 16][2], B0[KC / 32][4], A1[KC / 16][2], B1[KC / 32][4];
                auto wait = [&](unsigned sl, unsigned ph) { if (!(mode & 1)) mbar_wait(full + sl, ph); };
                auto release = [&](unsigned sl) { if (!(mode & 512)) __syncwarp(); if (lane == 0 && !(mode & 1)) mbar_arrive(empty + sl); };
                auto adv = [&](unsigned &sl, unsigned &ph) { if (++sl == (unsigned)ns) { sl = 0; ph ^= 1; } };
                /* a full chunk's operands: 4 ldmatrix of W (slices 2p, 2p + 1), 8 A quads of X (macros: arrays stay registers) */
#define LOADC(A, Bm, sl, c)                                                                                                  \
    do {                                                                                                                   \
        const uint32_t wb_ = wl + (sl) * (STAGE * 2), xb_ = xq0 + (c) * (KC / 16) * 32;                                      \
        _Pragma("unroll") for (int p_ = 0; p_ < KC / 32; p_++)                                                              \
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"                                    \
                         : "=r"(Bm[p_][0]), "=r"(Bm[p_][1]), "=r"(Bm[p_][2]), "=r"(Bm[p_][3]) : "r"(wb_ + woff[p_]));         \
        _Pragma("unroll") for (int j_ = 0; j_ < KC / 16; j_++)                                                              \
            asm volatile("ld.shared.v2.b32 {%0,%1}, [%2];" : "=r"(A[j_][0]), "=r"(A[j_][1]) : "r"(xb_ + j_ * 32));          \
    } while (0)
#define MMAS(A, Bm)                                                                                                          \
    do {                                                                                                                   \
        _Pragma("unroll") for (int j_ = 0; j_ < KC / 16; j_++)                                                              \
            mma16816(d, A[j_][0], A[j_][1], Bm[j_ >> 1][2 * (j_ & 1)], Bm[j_ >> 1][2 * (j_ & 1) + 1]);                      \
    } while (0)
                /* the full chunks, the next one's operands loaded before this one's MMAs; then a partial chunk */
                unsigned sl = cslot, ph = cph;
/* one full chunk: chunk cn's operands into (AN, BN) once its stage is in, this one's MMAs on (AC, BC), its slot freed */
#define CHUNK(AC, BC, AN, BN, cn)                                                                                            \
    do {                                                                                                                   \
        unsigned sln_ = sl, phn_ = ph;                                                                                     \
        adv(sln_, phn_);                                                                                                   \
        if ((cn) < nfull) { wait(sln_, phn_); if (comp && !(mode & 256)) LOADC(AN, BN, sln_, (cn)); }                       \
        if (comp) { MMAS(AC, BC); if (mode & 128) MMAS(AC, BC); }                                                          \
        release(sl);                                                                                                       \
        sl = sln_; ph = phn_;                                                                                              \
    } while (0)
                if (nfull > 0) { wait(sl, ph); if (comp) { LOADC(A0, B0, sl, 0); if (mode & 256) LOADC(A1, B1, sl, 0); } }
                for (int c = 0; c < nfull; c += 2) { /* the two register sets in turn */
                    CHUNK(A0, B0, A1, B1, c + 1);
                    if (c + 1 >= nfull) break;
                    CHUNK(A1, B1, A0, B0, c + 2);
                }
                if (Ik % KC) {
                    const int kc = Ik % KC;
                    wait(sl, ph);
                    if (comp) {
                        const uint32_t wb = wl + sl * (STAGE * 2), xb = xq0 + nfull * (KC / 16) * 32;
                        for (int j = 0; j < kc / 16; j += 2) {
                            uint32_t Bp[4], Aa[2], Ab[2];
                            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                                         : "=r"(Bp[0]), "=r"(Bp[1]), "=r"(Bp[2]), "=r"(Bp[3]) : "r"(wb + woffj(j)));
                            asm volatile("ld.shared.v2.b32 {%0,%1}, [%2];" : "=r"(Aa[0]), "=r"(Aa[1]) : "r"(xb + j * 32));
                            asm volatile("ld.shared.v2.b32 {%0,%1}, [%2];" : "=r"(Ab[0]), "=r"(Ab[1]) : "r"(xb + j * 32 + 32));
                            mma16816(d, Aa[0], Aa[1], Bp[0], Bp[1]);
                            if (j + 1 < kc / 16) mma16816(d, Ab[0], Ab[1], Bp[2], Bp[3]);
                        }
                    }
                    release(sl);
                    adv(sl, ph);
                }
                cslot = sl; cph = ph;
                const float d0 = d[0], d1 = d[1];
                if (act && g == 0) {
                    const int col = grp * 8 + 2 * t;
                    for (int e = 0; e < 2; e++) {
                        const int cc = col + e;
                        if (cc >= op.O) continue;
                        const float a = e ? d1 : d0;
                        if (op.kind == OP_QKV) B.qkv[cc] = __float2half(a + __half2float(op.bias[cc]));
                        else if (op.kind == OP_FC) {
                            const float y = __half2float(__float2half(a + __half2float(op.bias[cc])));
                            B.fc[cc] = __float2half(0.5f * y * (1.0f + tanhf(0.7978845608f * (y + 0.044715f * y * y * y))));
                        } else if (op.kind == OP_LOGITS) {
                            B.logits[cc] = a;
                            if (a > cbest || (a == cbest && cc < cidx)) { cbest = a; cidx = cc; }
                        } else B.part[piece * op.O + cc] = a;
                    }
                }
            }
            if (op.kind == OP_LOGITS) { /* the block's candidate for the argmax */
                const int k = block_best(cbest, cidx, red, redi);
                if (threadIdx.x == 0) B.cand[b] = make_float2(red[k], __int_as_float(redi[k]));
            }
            STAMP(2);
            LN_CONSTS(nx);
            barrier();
            STAMP(3);
        }
}

__global__ void fill(__half *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        p[i] = __float2half(((float)(h & 0xffff) / 65536.0f - 0.5f) * 0.04f);
    }
}

static std::string mode_text(int mode) {
    static const char *bit[10] = {"weights not streamed", "no grid barriers", "flag barriers", "", "no MMAs", "", "",
                                  "MMAs twice", "operands loaded once", "no syncwarp"};
    std::string t = "mode " + std::to_string(mode) + (mode ? " (" : " (the step");
    bool first = true;
    for (int i = 0; i < 10; i++)
        if ((mode >> i & 1) && bit[i][0]) { t += (first ? "" : ", ") + std::string(bit[i]); first = false; }
    return t + ")";
}
static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

/* one shape: its weights, ops and the kernel timed; prints one line per ATT_NS */
static float h2f(__half h) { return __half2float(h); }
static float rh(double v) { return __half2float(__float2half((float)v)); }
/* the ops' arithmetic on the CPU for one step of one layer from x0 (H * 64 == C; gain 1, shift 0): the logits */
static std::vector<double> reference(int C, int V, int PP, const std::vector<__half> &W, const std::vector<__half> &bias, const std::vector<float> &x0) {
    auto ln = [&](const std::vector<double> &v) {
        double m = 0, q = 0;
        for (int i = 0; i < C; i++) m += v[i];
        m /= C;
        for (int i = 0; i < C; i++) q += (v[i] - m) * (v[i] - m);
        const double r = 1.0 / sqrt(q / C + 1e-5);
        std::vector<double> y(C);
        for (int i = 0; i < C; i++) y[i] = rh((v[i] - m) * r);
        return y;
    };
    auto mv = [&](size_t off, int I, int k0, int k1, const std::vector<double> &xin, int o) {
        double a = 0;
        for (int k = k0; k < k1; k++) a += xin[k] * h2f(W[off + (size_t)o * I + k]);
        return a;
    };
    const size_t wq = 0, wp = (size_t)3 * C * C, wf = wp + (size_t)C * C, wf2 = wf + (size_t)4 * C * C, wte = wf2 + (size_t)4 * C * C;
    std::vector<double> x(x0.begin(), x0.end());
    std::vector<double> X = ln(x), qkv(3 * C), att(C), fc(4 * C), logits(V);
    for (int o = 0; o < 3 * C; o++) qkv[o] = rh(mv(wq, C, 0, C, X, o) + h2f(bias[o]));
    for (int i = 0; i < C; i++) att[i] = rh(qkv[i] * qkv[C + i] * 0.125 + qkv[2 * C + i]);
    for (int o = 0; o < C; o++) {
        double a = 0;
        for (int p = 0; p < PP; p++) a += mv(wp, C, p * C / PP, (p + 1) * C / PP, att, o);
        x[o] += a + h2f(bias[5 * C + o]);
    }
    X = ln(x);
    for (int o = 0; o < 4 * C; o++) {
        const double y = rh(mv(wf, C, 0, C, X, o) + h2f(bias[3 * C + o]));
        fc[o] = rh(0.5 * y * (1.0 + tanh(0.7978845608 * (y + 0.044715 * y * y * y))));
    }
    for (int o = 0; o < C; o++) x[o] += mv(wf2, 4 * C, 0, 4 * C, fc, o) + h2f(bias[6 * C + o]);
    X = ln(x);
    for (int o = 0; o < V; o++) logits[o] = mv(wte, C, 0, C, X, o);
    return logits;
}

static void shape(int C, int L, int H, int V, int PP, const std::vector<std::array<int, 2>> &runs, float copy_gbs, bool check = false) {
    const size_t per_layer = (size_t)3 * C * C + (size_t)C * C + 2 * (size_t)4 * C * C, wte = (size_t)V * C;
    const size_t n_w = per_layer * L + wte;
    __half *W, *bias;
    CK(cudaMalloc(&W, n_w * 2));
    CK(cudaMalloc(&bias, (size_t)8 * C * 2));
    fill<<<1024, 256>>>(W, n_w, 1u);
    fill<<<64, 256>>>(bias, (size_t)8 * C, 2u);
    CK(cudaGetLastError());
    std::vector<Op> ops;
    for (int l = 0; l < L; l++) {
        const __half *w = W + per_layer * l;
        const __half *wq = w, *wp = wq + (size_t)3 * C * C, *wf = wp + (size_t)C * C, *wf2 = wf + (size_t)4 * C * C;
        ops.push_back({OP_QKV, wq, bias, 3 * C, C, 1, bias + 4 * C, l ? 4 : 0, nullptr});
        ops.push_back({OP_ATT, nullptr, nullptr, C, C, 1, nullptr, 0, nullptr});
        ops.push_back({OP_PROJ, wp, nullptr, C, C, PP, nullptr, 0, nullptr});
        ops.push_back({OP_FC, wf, bias + 3 * C, 4 * C, C, 1, bias + 5 * C, PP, nullptr});
        ops.push_back({OP_FC2, wf2, nullptr, C, 4 * C, 4, nullptr, 0, nullptr});
    }
    ops.push_back({OP_LOGITS, W + per_layer * L, nullptr, V, C, 1, bias + 6 * C, 4, nullptr});
    ops.push_back({OP_ARGMAX, nullptr, nullptr, V, C, 1, nullptr, 0, nullptr});
    /* a tensor map per product: W [O][pieces][Ik] as {Ik, pieces, O}, boxes of 64 x 1 x 8, 128-byte swizzle */
    typedef CUresult (*enc_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *, const cuuint64_t *,
                               const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                               CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !f) { printf("no cuTensorMapEncodeTiled\n"); exit(1); }
    std::vector<CUtensorMap> maps(ops.size());
    CUtensorMap *d_maps;
    CK(cudaMalloc(&d_maps, maps.size() * sizeof(CUtensorMap)));
    for (size_t i = 0; i < ops.size(); i++) {
        memset(&maps[i], 0, sizeof maps[i]);
        if (!ops[i].W) continue;
        const int Ik = ops[i].I / ops[i].pieces;
        const cuuint64_t dims[3] = {(cuuint64_t)Ik, (cuuint64_t)ops[i].pieces, (cuuint64_t)ops[i].O};
        const cuuint64_t strides[2] = {(cuuint64_t)Ik * 2, (cuuint64_t)ops[i].I * 2};
        const cuuint32_t box[3] = {64, 1, 8}, one[3] = {1, 1, 1};
        if (((enc_fn)f)(&maps[i], CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, (void *)ops[i].W, dims, strides, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            printf("tensor map %zu failed\n", i);
            exit(1);
        }
        ops[i].map = d_maps + i;
    }
    CK(cudaMemcpy(d_maps, maps.data(), maps.size() * sizeof(CUtensorMap), cudaMemcpyHostToDevice));
    Op *d_ops;
    CK(cudaMalloc(&d_ops, ops.size() * sizeof(Op)));
    CK(cudaMemcpy(d_ops, ops.data(), ops.size() * sizeof(Op), cudaMemcpyHostToDevice));
    Bufs B;
    float *fbuf;
    const size_t nf = 2 * (size_t)C + 4 * (size_t)4 * C + (size_t)V + 2 * (size_t)4 * C;
    CK(cudaMalloc(&fbuf, nf * 4));
    CK(cudaMemset(fbuf, 0, nf * 4));
    B.x[0] = fbuf; B.x[1] = fbuf + C; B.part = fbuf + 2 * C; B.logits = B.part + (size_t)16 * C;
    float *gb = B.logits + V;
    std::vector<float> ones(4 * C, 1.0f);
    CK(cudaMemcpy(gb, ones.data(), (size_t)4 * C * 4, cudaMemcpyHostToDevice));
    B.g = gb; B.b = gb + 4 * C;
    __half *hb;
    CK(cudaMalloc(&hb, (size_t)(3 * C + C + 4 * C) * 2));
    CK(cudaMemset(hb, 0, (size_t)(3 * C + C + 4 * C) * 2));
    B.qkv = hb; B.att = hb + 3 * C; B.fc = B.att + C;
    CK(cudaMalloc(&B.token, 4));
    CK(cudaMalloc(&B.ctr, 4));
    CK(cudaMemset(B.ctr, 0, 4));
    CK(cudaMalloc(&B.flags, 4 * 1024));
    CK(cudaMalloc(&B.cand, 8 * 1024));
    if (getenv("PS_DEBUG")) {
        printf("W %p bias %p x %p %p part %p logits %p g %p b %p qkv %p att %p fc %p token %p ctr %p flags %p cand %p\n", (void *)W, (void *)bias,
               (void *)B.x[0], (void *)B.x[1], (void *)B.part, (void *)B.logits, (void *)B.g, (void *)B.b, (void *)B.qkv, (void *)B.att,
               (void *)B.fc, (void *)B.token, (void *)B.ctr, (void *)B.flags, (void *)B.cand);
        for (size_t i = 0; i < ops.size(); i++)
            printf("op %zu kind %d W %p bias %p O %d I %d pieces %d in_bias %p in_pieces %d\n", i, ops[i].kind, (const void *)ops[i].W,
                   (const void *)ops[i].bias, ops[i].O, ops[i].I, ops[i].pieces, (const void *)ops[i].in_bias, ops[i].in_pieces);
    }
    {
        std::vector<float> x(C);
        for (int i = 0; i < C; i++) x[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
        CK(cudaMemcpy(B.x[0], x.data(), C * 4, cudaMemcpyHostToDevice));
    }
    int sms, smem_max;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    const int other = 8192 * 2 + 2048 + (int)(ops.size() * sizeof(Op)); /* Xq, the ops, the static reductions and the alignment */
    const int ns = (smem_max - other) / (STAGE * 2 + 16);
    const size_t smem = (size_t)ns * STAGE * 2 + (size_t)ns * 16 + 8192 * 2 + ops.size() * sizeof(Op) + 1024;
    CK(cudaFuncSetAttribute(step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const double bytes = (double)n_w * 2;
    const int n_ops = (int)ops.size();
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    long long *d_trace;
    CK(cudaMalloc(&d_trace, (size_t)2 * n_ops * 8 * 8));
    for (auto run : runs) {
        int steps = 1, ai = run[0], mode = run[1];
        const int a = ai;
        long long *tr = nullptr;
        void *args[] = {&d_ops, (void *)&n_ops, &B, &steps, (void *)&ns, &ai, &H, &mode, &tr};
        CK(cudaMemsetAsync(B.flags, 0, 4 * 1024));
        CK(cudaLaunchCooperativeKernel((void *)step_kernel, sms, 32 * (NWC + 1), args, smem, 0));
        CK(cudaDeviceSynchronize());
        std::vector<float> per;
        steps = 20;
        for (int rep = 0; rep < 5; rep++) {
            CK(cudaMemsetAsync(B.flags, 0, 4 * 1024));
            CK(cudaEventRecord(e0));
        CK(cudaLaunchCooperativeKernel((void *)step_kernel, sms, 32 * (NWC + 1), args, smem, 0));
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            per.push_back(ms / steps);
        }
        const float m = median(per), floor_ms = (float)(bytes / (copy_gbs * 1e6));
        printf("C %d L %d H %d V %d: %d ops, %d grid barriers a step, ring %d stages of %d B; attention modelled %d ns; %s: "
               "%.4f ms a step (min %.4f), weights %.1f MB -> %.0f GB/s, floor at the copy rate %.4f ms (%.0f%% of it)%s\n",
               C, L, H, V, n_ops, 5 * L + 2, ns, STAGE * 2, a, mode_text(mode).c_str(), m, *std::min_element(per.begin(), per.end()), bytes / 1e6,
               bytes / (m * 1e6), floor_ms, 100.0f * floor_ms / m, "");
        /* one more launch of 3 steps with the stamps: each op kind's phases, mean us, in blocks 0 and G - 1 */
        steps = 3;
        tr = d_trace;
        CK(cudaMemsetAsync(B.flags, 0, 4 * 1024));
        CK(cudaLaunchCooperativeKernel((void *)step_kernel, sms, 32 * (NWC + 1), args, smem, 0));
        CK(cudaDeviceSynchronize());
        std::vector<long long> h(2 * n_ops * 8);
        CK(cudaMemcpy(h.data(), d_trace, h.size() * 8, cudaMemcpyDeviceToHost));
        static const char *kn[7] = {"qkv", "attention", "proj", "fc", "fc2", "logits", "argmax"};
        for (int bl = 0; bl < 2; bl++) {
            printf("   block %s, us a op (input ready | chains + epilogue | barrier), by kind:", bl ? "G-1" : "0");
            double tot = 0;
            for (int k = 0; k < 7; k++) {
                double p[3] = {0, 0, 0};
                int n = 0;
                for (int i = 0; i < n_ops; i++) {
                    if (ops[i].kind != k) continue;
                    const long long *e = &h[((size_t)bl * n_ops + i) * 8];
                    for (int j = 0; j < 3; j++) p[j] += (e[j + 1] - e[j]) / 1980.0;
                    n++;
                }
                if (!n) continue;
                printf("  %s %.2f | %.2f | %.2f", kn[k], p[0] / n, p[1] / n, p[2] / n);
                tot += p[0] + p[1] + p[2];
            }
            const long long *e0p = &h[(size_t)bl * n_ops * 8], *e1p = &h[((size_t)bl * n_ops + n_ops - 1) * 8];
            printf("  (summed %.1f us at 1.98 GHz; first stamp to last %.1f us, %.1f us by the global timer: SM clock %.2f GHz)\n", tot,
                   (e1p[3] - e0p[0]) / 1980.0, (e1p[7] - e0p[4]) / 1000.0, (double)(e1p[3] - e0p[0]) / (double)(e1p[7] - e0p[4]));
        }
    }
    if (check) { /* one step of one layer against reference() */
        int steps = 1, ai = 0, mode = 0;
        long long *tr = nullptr;
        void *args[] = {&d_ops, (void *)&n_ops, &B, &steps, (void *)&ns, &ai, &H, &mode, &tr};
        CK(cudaLaunchCooperativeKernel((void *)step_kernel, sms, 32 * (NWC + 1), args, smem, 0));
        CK(cudaDeviceSynchronize());
        std::vector<__half> hw(n_w), hbias(8 * C);
        CK(cudaMemcpy(hw.data(), W, n_w * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hbias.data(), bias, (size_t)8 * C * 2, cudaMemcpyDeviceToHost));
        std::vector<float> x0(C), lg(V);
        for (int i = 0; i < C; i++) x0[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
        CK(cudaMemcpy(lg.data(), B.logits, (size_t)V * 4, cudaMemcpyDeviceToHost));
        const std::vector<double> ref = reference(C, V, PP, hw, hbias, x0);
        double worst = 0, scale = 0;
        int am = 0;
        for (int o = 0; o < V; o++) { worst = std::max(worst, fabs(lg[o] - ref[o])); scale = std::max(scale, fabs(ref[o])); if (ref[o] > ref[am]) am = o; }
        int tk;
        CK(cudaMemcpy(&tk, B.token, 4, cudaMemcpyDeviceToHost));
        printf("check (C %d, one layer, V %d): largest logit error %.3g of logits up to %.3g; token %d, reference's argmax %d: %s\n", C, V,
               worst, scale, tk, am, worst <= 2e-2 * scale && tk == am ? "ok" : "FAILED");
    }
    int tok;
    CK(cudaMemcpy(&tok, B.token, 4, cudaMemcpyDeviceToHost));
    printf("  (token %d)\n", tok);
    cudaFree(W); cudaFree(bias); cudaFree(d_ops); cudaFree(d_maps); cudaFree(d_trace); cudaFree(fbuf); cudaFree(hb); cudaFree(B.token); cudaFree(B.ctr); cudaFree(B.flags); cudaFree(B.cand);
    cudaEventDestroy(e0); cudaEventDestroy(e1);
}

int main(int argc, char **argv) {
    /* the copy rate: a 2 GB device-to-device copy, read + write */
    const size_t n = (size_t)1 << 30;
    void *a, *bb;
    CK(cudaMalloc(&a, n)); CK(cudaMalloc(&bb, n));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<float> r;
    for (int i = 0; i < 6; i++) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpyAsync(bb, a, n, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i) r.push_back(2.0f * n / (ms * 1e6f));
    }
    const float gbs = median(r);
    cudaFree(a); cudaFree(bb);
    printf("copy rate %.0f GB/s\n", gbs);
    if (argc == 2 && !strcmp(argv[1], "check")) {
        shape(256, 1, 4, 1000, 2, {}, gbs, true);
        shape(768, 1, 12, 50257, 2, {}, gbs, true);
        return 0;
    }
    if (argc >= 5) {
        const int PP = argc > 5 ? atoi(argv[5]) : 4;
        shape(atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), PP, {{argc > 6 ? atoi(argv[6]) : 2000, 0}}, gbs);
        return 0;
    }
    std::vector<std::array<int, 2>> runs = {{2000, 0}, {2000, 1}, {2000, 18}};
    if (getenv("PS_RUNS")) { /* "att:mode,att:mode,..." */
        runs.clear();
        for (const char *p = getenv("PS_RUNS"); *p;) {
            int a, m, n;
            if (sscanf(p, "%d:%d%n", &a, &m, &n) != 2) break;
            runs.push_back({a, m});
            p += n;
            if (*p == ',') p++;
        }
    }
    shape(768, 12, 12, 50257, 2, runs, gbs);
    shape(1600, 48, 25, 50257, 4, runs, gbs);
    return 0;
}
