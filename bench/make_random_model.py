"""bench/make_random_model.py SIZE OUTDIR [dtype] — a GPT-2 of a standard shape with random weights, in
Hugging Face layout (config.json + model.safetensors), for timing runs that need files (bench_mpi).
SIZE: 124M, 355M, 774M or 1558M. Weights ~ N(0, 0.02), layer norms weight 1 bias 0; F16 by default."""
import json, os, sys
import torch
from safetensors.torch import save_file

SIZES = {"124M": (12, 768, 12), "355M": (24, 1024, 16), "774M": (36, 1280, 20), "1558M": (48, 1600, 25)}
size, out = sys.argv[1], sys.argv[2]
dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[sys.argv[3] if len(sys.argv) > 3 else "f16"]
L, C, H = SIZES[size]
V, P = 50257, 1024
dev = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator(device=dev).manual_seed(0)
r = lambda *s: (torch.randn(*s, device=dev, generator=g) * 0.02).to(dtype).cpu()
t = {"wte.weight": r(V, C), "wpe.weight": r(P, C), "ln_f.weight": torch.ones(C, dtype=dtype), "ln_f.bias": torch.zeros(C, dtype=dtype)}
for i in range(L):
    p = f"h.{i}."
    t.update({p + "ln_1.weight": torch.ones(C, dtype=dtype), p + "ln_1.bias": torch.zeros(C, dtype=dtype),
              p + "attn.c_attn.weight": r(C, 3 * C), p + "attn.c_attn.bias": r(3 * C),
              p + "attn.c_proj.weight": r(C, C), p + "attn.c_proj.bias": r(C),
              p + "ln_2.weight": torch.ones(C, dtype=dtype), p + "ln_2.bias": torch.zeros(C, dtype=dtype),
              p + "mlp.c_fc.weight": r(C, 4 * C), p + "mlp.c_fc.bias": r(4 * C),
              p + "mlp.c_proj.weight": r(4 * C, C), p + "mlp.c_proj.bias": r(C)})
os.makedirs(out, exist_ok=True)
save_file(t, os.path.join(out, "model.safetensors"))
json.dump({"model_type": "gpt2", "n_layer": L, "n_embd": C, "n_head": H, "n_positions": P, "vocab_size": V,
           "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}, open(os.path.join(out, "config.json"), "w"))
print(f"{out}: {size} random, {sum(x.numel() for x in t.values()) / 1e6:.0f}M parameters")
