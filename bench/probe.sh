#!/usr/bin/env bash
# bench/probe.sh build|run — what each kind of kernel adds to a batch-1 decode step (the profile behind
# RESULTS.md's "where a batch-1 step's time goes"). `build` (here, nvcc only) makes bench_gpt2 variants from
# copies of gpt2.cuh in which one kind of kernel returns right after its programmatic-dependent-launch wait
# (its pre-wait weight/K-V streaming stays; its dependent work goes): att (the few-row decode attention,
# gpt2__attn_mma_kernel), chain (the
# skinny products without a fused LN: attention and MLP projections, lm_head: X load, MMA chain, epilogue),
# lnf (the products with the LN folded in: qkv and the MLP's first: LN, chain, epilogue), lnfln (the same
# products without their LN: what the LN alone adds), ln (residual + LN
# kernels: the embedding and the final LN), samp (the sampler, after it advances the positions: a step's context
# still grows by one). `run` (on the GPU) times a batch-1 step,
# graph replayed back to back (bench_gpt2 --steps), for the real binary and each variant. The outputs of a
# variant are garbage; only its time means something: the real step minus the variant's is what that kind
# of kernel's work after its wait adds to the step.
set -euo pipefail
cd "$(dirname "$0")/.."
vars="att chain lnf lnfln ln samp"
if [ "${1:-run}" = build ]; then
  for v in $vars; do
    mkdir -p bench/probe/$v
    python3 - "$v" <<'PY'
import sys
v = sys.argv[1]
s = open('gpt2.cuh').read()
def sub(old, new):  # replace the one place `old` occurs
    global s
    assert s.count(old) == 1, old
    s = s.replace(old, new)
def ins(at, add):  # add right after the first line of the unique context `at`
    first, rest = at.split("\n", 1)
    sub(at, first + "\n" + add + "\n" + rest)
# the variants' products give garbage: keep them on gpt2.cuh's kernel anyway (gpt2__skinny_check would not)
sub("            if (!st) same = !memcmp(h1, h2, bytes);", "            if (!st) same = 1;")
# per variant: (unique context, what goes right after its first line) or ('=', old, new)
cut = {
    'att': ("    gpt2__pdl_enter();\n    const T *q = qkv + (size_t)r * 3 * C + (size_t)h * HD, *kn", "    if (STG) gpt2__cp_wait<0>();\n    return;"),
    'chain': ("    gpt2__pdl_enter();\n    if constexpr (LNE > 0) {", "    if (LNE == 0) { gpt2__cp_wait<0>(); return; }"),
    'lnf': ("    gpt2__pdl_enter();\n    if constexpr (LNE > 0) {", "    if (LNE > 0) { gpt2__cp_wait<0>(); return; }"),
    'lnfln': ('=', "for (int r = 0; r < n; r++)\n            gpt2__lnf_row", "for (int r = 0; r < 0; r++)\n            gpt2__lnf_row"),
    'ln': ("    gpt2__pdl_enter();\n    const int t = mode == 0", "    return;"),
    'samp': ('=', "    float *p = logits + (size_t)row * ld;\n    if (!pk.sample)", "    return;\n    float *p = logits + (size_t)row * ld;\n    if (!pk.sample)"),
}[v]
if cut[0] == '=': sub(cut[1], cut[2])
else: ins(cut[0], cut[1])
open('bench/probe/%s/gpt2.cuh' % v, 'w').write(s)
PY
    nvcc -x cu -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xcompiler -fopenmp -Ibench/probe/$v -I. \
      bench/bench_gpt2.cu -o bench/probe/$v/bench_gpt2 -lcublasLt -lcublas
  done
  exit 0
fi
echo "real: $(bench/bench_gpt2 --steps 124M 1558M | grep 'graph back' | tr '\n' ' ')"
for v in $vars; do echo "$v: $(bench/probe/$v/bench_gpt2 --steps 124M 1558M | grep 'graph back' | tr '\n' ' ')"; done
echo "real: $(bench/bench_gpt2 --steps 124M 1558M | grep 'graph back' | tr '\n' ' ')"
