#!/usr/bin/env bash
# bench/mpi_load.sh [RANKS...] — gpt2_mpi_load's time on CPU ranks (no GPU needed): writes a 124M-shaped F32
# checkpoint (every weight 0.01; 498 MB) to /tmp/gpt2-mpi-load-model with Python's standard library, builds
# bench/mpi_load against the headers in HEADERS (default: this tree; e.g. a directory holding an older
# gpt2_mpi.h and gpt2.cuh to compare), and runs it under mpirun at each rank count (default 1 2 4), the way the
# MPI tests run (--oversubscribe --bind-to none, OMP_NUM_THREADS=1, vader single copy off; MCA="" for defaults).
set -euo pipefail
cd "$(dirname "$0")/.."
model=/tmp/gpt2-mpi-load-model
hdr=${HEADERS:-.}
mca=${MCA---mca btl_vader_single_copy_mechanism none}
[ -f $model/model.safetensors ] || python3 - "$model" <<'PY'
import json, os, struct, sys
L, C, H, P, V = 12, 768, 12, 1024, 50257
out = sys.argv[1]
shapes = {"wte.weight": [V, C], "wpe.weight": [P, C], "ln_f.weight": [C], "ln_f.bias": [C]}
for i in range(L):
    p = f"h.{i}."
    shapes.update({p + "ln_1.weight": [C], p + "ln_1.bias": [C], p + "attn.c_attn.weight": [C, 3 * C], p + "attn.c_attn.bias": [3 * C],
                   p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C], p + "ln_2.weight": [C], p + "ln_2.bias": [C],
                   p + "mlp.c_fc.weight": [C, 4 * C], p + "mlp.c_fc.bias": [4 * C], p + "mlp.c_proj.weight": [4 * C, C], p + "mlp.c_proj.bias": [C]})
hdr, off = {}, 0
for k, s in shapes.items():
    n = 4
    for d in s: n *= d
    hdr[k] = {"dtype": "F32", "shape": s, "data_offsets": [off, off + n]}
    off += n
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
os.makedirs(out, exist_ok=True)
blk = struct.pack("<f", 0.01) * (1 << 20)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    left = off
    while left:
        k = min(left, len(blk))
        f.write(blk[:k])
        left -= k
json.dump({"model_type": "gpt2", "n_layer": L, "n_embd": C, "n_head": H, "n_positions": P, "vocab_size": V,
           "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}, open(os.path.join(out, "config.json"), "w"))
PY
mpicc -x c -O2 -std=gnu99 -fopenmp -DGPT2_NO_CUDA -I"$hdr" -I. bench/mpi_load.c -o /tmp/gpt2-mpi-load -lm
cat $model/model.safetensors > /dev/null # in the page cache before the first run
for np in ${*:-1 2 4}; do
    mpirun --allow-run-as-root --oversubscribe --bind-to none $mca -x OMP_NUM_THREADS=1 -np "$np" /tmp/gpt2-mpi-load $model
done
