#!/usr/bin/env python3
"""make_reference.py - regenerate every model fixture of test_gpt2 from scratch.

    python3 tools/make_reference.py          (from the repository root; needs torch,
                                              transformers, safetensors, numpy)

Writes, deterministically (fixed seeds):
  tests/models/NAME/config.json          as Hugging Face's GPT2Config writes it
  tests/models/NAME/model.safetensors    random GPT-2 weights, F32/F16/BF16, either key layout
  tests/models/NAME/reference.safetensors
      tokens  I32 [B,T]    random token ids
      logits  F32 [B,T,V]  Hugging Face GPT2LMHeadModel run in float64 on the stored weights
      prompt  I32 [P]      a random prompt
      greedy  I32 [N]      float64 greedy continuation of prompt (with and without KV cache)
      __metadata__         dtype, layout, versions, smallest greedy margin
  tests/bad/CASE/config.json + model.safetensors   malformed inputs made from tests/models/micro_f32

The reference model is loaded back from the files just written with from_pretrained, so it
sees the weights as stored (after rounding to F16/BF16), upcast to float64. Every greedy step
must win by a margin of at least 1e-2 x (1 + max|logit|) (ten times the CUDA fp32 tolerance),
so a float32 engine reproduces the continuation exactly, and the continuation must hold at
least N/2 distinct tokens (a repeated token would hide KV-cache errors); prompts are redrawn
until both hold.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "tests", "models")
BAD = os.path.join(ROOT, "tests", "bad")

MARGIN = 1e-2  # greedy top1 - top2 >= MARGIN * (1 + max|logit|) at every step

# layout: "bare" keys are h.0.attn.c_attn.weight (published gpt2 checkpoints),
#         "prefixed" keys are transformer.h.0.attn.c_attn.weight (save_pretrained).
# buffers: also store the causal-mask buffers h.N.attn.bias / h.N.attn.masked_bias.
# lm_head: also store lm_head.weight (a copy of wte, as some checkpoints do).
FIXTURES = [
    dict(name="f32_bare_buffers", dtype="F32", layout="bare", buffers=True, lm_head=False,
         n_layer=2, n_head=3, n_embd=96, vocab=101, n_positions=64, n_ctx_key=True, eps=1e-5,
         seed=101, batch=4, seq=64, prompt=10, new=16),
    dict(name="f16_prefixed_lmhead", dtype="F16", layout="prefixed", buffers=False, lm_head=True,
         n_layer=3, n_head=5, n_embd=120, vocab=257, n_positions=128, n_ctx_key=False, eps=1e-3,
         seed=257, batch=4, seq=128, prompt=16, new=20),
    dict(name="bf16_prefixed_long", dtype="BF16", layout="prefixed", buffers=False, lm_head=False,
         n_layer=2, n_head=2, n_embd=128, vocab=1003, n_positions=1040, n_ctx_key=False, eps=1e-5,
         seed=1003, batch=1, seq=400, prompt=20, new=16),
    dict(name="f32_bare_ctx32", dtype="F32", layout="bare", buffers=False, lm_head=False,
         n_layer=3, n_head=2, n_embd=80, vocab=77, n_positions=32, n_ctx_key=False, eps=1e-5,
         seed=77, batch=8, seq=32, prompt=12, new=20),
    dict(name="micro_f32", dtype="F32", layout="bare", buffers=False, lm_head=False,
         n_layer=1, n_head=2, n_embd=16, vocab=50, n_positions=16, n_ctx_key=False, eps=1e-5,
         seed=50, batch=8, seq=16, prompt=4, new=12),
]

TORCH_DTYPE = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def random_weights(fx):
    """GPT-2 weights in float64 under the bare names (wte.weight, h.0.ln_1.weight, ...).
    Stds are far above HF's 0.02 so logits spread out and greedy steps win clearly; position
    embeddings outweigh token embeddings so greedy text moves on instead of repeating a token."""
    rng = np.random.default_rng(fx["seed"])
    C, V, P = fx["n_embd"], fx["vocab"], fx["n_positions"]
    proj = min(0.3, 1.2 / np.sqrt(C))
    w = {"wte.weight": rng.normal(0, 0.1, (V, C)), "wpe.weight": rng.normal(0, 0.3, (P, C))}

    def ln(name):
        w[name + ".weight"] = 1.0 + rng.normal(0, 0.2, C)
        w[name + ".bias"] = rng.normal(0, 0.1, C)

    for i in range(fx["n_layer"]):
        h = "h.%d." % i
        ln(h + "ln_1")
        w[h + "attn.c_attn.weight"] = rng.normal(0, proj, (C, 3 * C))  # Conv1D: [in, out]
        w[h + "attn.c_attn.bias"] = rng.normal(0, 0.1, 3 * C)
        w[h + "attn.c_proj.weight"] = rng.normal(0, proj, (C, C))
        w[h + "attn.c_proj.bias"] = rng.normal(0, 0.1, C)
        ln(h + "ln_2")
        w[h + "mlp.c_fc.weight"] = rng.normal(0, proj, (C, 4 * C))
        w[h + "mlp.c_fc.bias"] = rng.normal(0, 0.1, 4 * C)
        w[h + "mlp.c_proj.weight"] = rng.normal(0, 1.2 / np.sqrt(4 * C), (4 * C, C))
        w[h + "mlp.c_proj.bias"] = rng.normal(0, 0.1, C)
    ln("ln_f")
    return w


def stored_tensors(fx, w64):
    """The tensors as they go into model.safetensors: storage dtype, key layout, extras."""
    dt = TORCH_DTYPE[fx["dtype"]]
    prefix = "transformer." if fx["layout"] == "prefixed" else ""
    out = {prefix + k: torch.from_numpy(v).to(dt).contiguous() for k, v in w64.items()}
    if fx["buffers"]:
        P = fx["n_positions"]
        mask = torch.tril(torch.ones(P, P, dtype=torch.float32)).view(1, 1, P, P)
        for i in range(fx["n_layer"]):
            out[prefix + "h.%d.attn.bias" % i] = mask.clone()
            out[prefix + "h.%d.attn.masked_bias" % i] = torch.tensor(-1e4, dtype=torch.float32)
    if fx["lm_head"]:
        out["lm_head.weight"] = out[prefix + "wte.weight"].clone()
    return out


def hf_config(fx):
    extra = {"n_ctx": fx["n_positions"]} if fx["n_ctx_key"] else {}
    return GPT2Config(vocab_size=fx["vocab"], n_positions=fx["n_positions"], n_embd=fx["n_embd"],
                      n_layer=fx["n_layer"], n_head=fx["n_head"], layer_norm_epsilon=fx["eps"],
                      activation_function="gelu_new", bos_token_id=fx["vocab"] - 1,
                      eos_token_id=fx["vocab"] - 1, **extra)


def load_float64(path):
    """The model as HF loads it from path, upcast to float64 (eager attention)."""
    model, info = GPT2LMHeadModel.from_pretrained(path, dtype=torch.float64,
                                                  attn_implementation="eager",
                                                  output_loading_info=True)
    if info["missing_keys"]:
        sys.exit("%s: HF reports missing keys %s" % (path, info["missing_keys"]))
    return model.eval()


def check_loaded(model, stored, fx):
    """Every parameter HF loaded equals the stored tensor upcast to float64, bit for bit."""
    prefix = "transformer." if fx["layout"] == "prefixed" else ""
    sd = model.state_dict()
    for k, v in stored.items():
        if k.endswith("attn.bias") and v.dim() == 4 or k.endswith("masked_bias") or k == "lm_head.weight":
            continue
        mine = sd["transformer." + k[len(prefix):]]
        if not torch.equal(mine, v.to(torch.float64)):
            sys.exit("%s: HF loaded %s differently from what was stored" % (fx["name"], k))
    if not torch.equal(sd["lm_head.weight"], sd["transformer.wte.weight"]):
        sys.exit("%s: lm_head is not tied to wte" % fx["name"])


def greedy(model, prompt, n, use_cache):
    """n greedy tokens after prompt; also the smallest relative margin seen."""
    ids = list(prompt)
    margin = float("inf")
    past = None
    with torch.no_grad():
        for _ in range(n):
            if use_cache:
                feed = ids if past is None else ids[-1:]
                out = model(torch.tensor([feed]), past_key_values=past, use_cache=True)
                past = out.past_key_values
            else:
                out = model(torch.tensor([ids]), use_cache=False)
            logits = out.logits[0, -1]
            top = torch.topk(logits, 2).values
            margin = min(margin, float((top[0] - top[1]) / (1 + logits.abs().max())))
            ids.append(int(torch.argmax(logits)))
    return ids[len(prompt):], margin


def write_safetensors(path, tensors, metadata):
    """safetensors with its header keys sorted, so the bytes repeat run after run (the
    library's writer orders __metadata__ differently each time)."""
    codes = {torch.float32: "F32", torch.int32: "I32"}
    header, blobs, offset = {"__metadata__": dict(sorted(metadata.items()))}, [], 0
    for k in sorted(tensors):
        blob = tensors[k].contiguous().numpy().astype("<" + tensors[k].numpy().dtype.str[1:]).tobytes()
        header[k] = {"dtype": codes[tensors[k].dtype], "shape": list(tensors[k].shape),
                     "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    write_header(path, header, b"".join(blobs))


def make_model_fixture(fx):
    d = os.path.join(MODELS, fx["name"])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    hf_config(fx).save_pretrained(d)
    stored = stored_tensors(fx, random_weights(fx))
    save_file(stored, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})

    model = load_float64(d)
    check_loaded(model, stored, fx)
    rng = np.random.default_rng(fx["seed"] + 1)
    tokens = rng.integers(0, fx["vocab"], (fx["batch"], fx["seq"]))
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens), use_cache=False).logits

    for attempt in range(1000):
        prompt = rng.integers(0, fx["vocab"], fx["prompt"]).tolist()
        cont, margin = greedy(model, prompt, fx["new"], use_cache=True)
        if margin >= MARGIN and len(set(cont)) >= fx["new"] // 2:
            break
    else:
        sys.exit("%s: no prompt gives greedy margins >= %g and a varied continuation; change the seed"
                 % (fx["name"], MARGIN))
    plain, _ = greedy(model, prompt, fx["new"], use_cache=False)
    if plain != cont:
        sys.exit("%s: greedy differs with and without the KV cache" % fx["name"])

    ref = {
        "tokens": torch.from_numpy(tokens.astype(np.int32)),
        "logits": logits.to(torch.float32).contiguous(),
        "prompt": torch.tensor(prompt, dtype=torch.int32),
        "greedy": torch.tensor(cont, dtype=torch.int32),
    }
    layout = fx["layout"] + ("+buffers" if fx["buffers"] else "") + ("+lm_head" if fx["lm_head"] else "")
    meta = {"dtype": fx["dtype"], "layout": layout, "generator": "tools/make_reference.py",
            "reference": "transformers %s GPT2LMHeadModel, float64, eager attention" % transformers.__version__,
            "torch": torch.__version__, "greedy_min_margin": "%.4g" % margin,
            "greedy_margin_rule": "top1-top2 >= %g*(1+max|logit|)" % MARGIN,
            "prompt_attempts": str(attempt + 1)}
    write_safetensors(os.path.join(d, "reference.safetensors"), ref, meta)
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print("%-22s %-4s %-26s L%d H%d C%d hd%d V%d P%d eps %g  max|logit| %.2f  margin %.3g (%d tries)  %d bytes"
          % (fx["name"], fx["dtype"], layout, fx["n_layer"], fx["n_head"], fx["n_embd"],
             fx["n_embd"] // fx["n_head"], fx["vocab"], fx["n_positions"], fx["eps"],
             float(logits.abs().max()), margin, attempt + 1, size))


# ------------------------------------------------------------------ malformed inputs

def read_safetensors(path):
    """(header dict, data bytes) of a safetensors file, read by hand."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_raw(path, header_bytes, data, claimed_len=None):
    """A safetensors file from header bytes and data; claimed_len overrides the length prefix."""
    pad = (-len(header_bytes)) % 8
    header_bytes += b" " * pad
    n = len(header_bytes) if claimed_len is None else claimed_len
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n) + header_bytes + data)


def write_header(path, header, data):
    write_raw(path, json.dumps(header, separators=(",", ":")).encode(), data)


def make_bad_fixtures():
    src = os.path.join(MODELS, "micro_f32")
    good_st = os.path.join(src, "model.safetensors")
    good_cfg = json.load(open(os.path.join(src, "config.json")))
    header, data = read_safetensors(good_st)
    tensors = {}
    with safe_open(good_st, "pt") as f:
        for k in f.keys():
            tensors[k] = f.get_tensor(k)
    shutil.rmtree(BAD, ignore_errors=True)
    os.makedirs(BAD)
    cases = []

    def case(name, why, expect, cfg=good_cfg, cfg_text=None):
        d = os.path.join(BAD, name)
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(cfg_text if cfg_text is not None else json.dumps(cfg, indent=2) + "\n")
        cases.append((name, why, expect))
        return os.path.join(d, "model.safetensors")

    raw = open(good_st, "rb").read()
    hlen = struct.unpack("<Q", raw[:8])[0]

    p = case("truncated", "model.safetensors cut in the middle of its data section (%d of %d bytes)"
             % (8 + hlen + len(data) // 2, len(raw)),
             "GPT2_ERR_FORMAT; names model.safetensors and a tensor whose data runs past the end "
             "(or the file size versus the size the header needs)")
    open(p, "wb").write(raw[:8 + hlen + len(data) // 2])

    p = case("header_past_eof", "the 8-byte header length (%d) is larger than the file (%d bytes)"
             % (len(raw) + 8, len(raw)),
             "GPT2_ERR_FORMAT; names model.safetensors, the header length and the file size")
    write_raw(p, raw[8:8 + hlen], data, claimed_len=len(raw) + 8)

    p = case("header_oversized", "the header length claims 200 MB (209715200 bytes); the file is small",
             "GPT2_ERR_FORMAT; names model.safetensors and the header length; nothing of that "
             "size is allocated")
    write_raw(p, raw[8:8 + hlen], data, claimed_len=200 * 1024 * 1024)

    p = case("header_not_json", "the header bytes are not JSON (same length, text instead of an object)",
             "GPT2_ERR_FORMAT; names model.safetensors and says the header is not valid JSON")
    text = b"this header is not JSON at all "
    write_raw(p, (text * (hlen // len(text) + 1))[:hlen], data)

    p = case("tensor_missing", "h.0.mlp.c_fc.weight is absent (the file is otherwise valid)",
             "GPT2_ERR_FORMAT; names the tensor h.0.mlp.c_fc.weight")
    save_file({k: v for k, v in tensors.items() if k != "h.0.mlp.c_fc.weight"}, p,
              metadata={"format": "pt"})

    p = case("tensor_wrong_shape", "h.0.attn.c_attn.weight stored transposed, [48, 16] instead of [16, 48] "
             "(same byte count)",
             "GPT2_ERR_FORMAT; names h.0.attn.c_attn.weight, the expected [16, 48] and the found [48, 16]")
    t = dict(tensors)
    t["h.0.attn.c_attn.weight"] = tensors["h.0.attn.c_attn.weight"].t().contiguous()
    save_file(t, p, metadata={"format": "pt"})

    p = case("tensor_offsets_outside", "wte.weight's data_offsets end 4096 bytes past the data section",
             "GPT2_ERR_FORMAT; names wte.weight and says its data lies outside the file's data section")
    h = json.loads(json.dumps(header))
    b, e = h["wte.weight"]["data_offsets"]
    h["wte.weight"]["data_offsets"] = [len(data) + 4096 - (e - b), len(data) + 4096]
    write_header(p, h, data)

    p = case("tensor_bytes_mismatch", "wte.weight's shape says [50, 17] but its data_offsets hold [50, 16] of F32",
             "GPT2_ERR_FORMAT; names wte.weight and the byte counts (shape x dtype versus offsets)")
    h = json.loads(json.dumps(header))
    h["wte.weight"]["shape"] = [50, 17]
    write_header(p, h, data)

    p = case("dtype_i64", "wte.weight stored as I64 (integers), a dtype the loader does not read",
             "GPT2_ERR_FORMAT; names wte.weight and the dtype I64 (and the supported F32/F16/BF16)")
    t = dict(tensors)
    t["wte.weight"] = (tensors["wte.weight"] * 100).round().to(torch.int64)
    save_file(t, p, metadata={"format": "pt"})

    p = case("config_bad_json", "config.json cut off in the middle of an object",
             "GPT2_ERR_FORMAT; names config.json and says it is not valid JSON",
             cfg_text=json.dumps(good_cfg, indent=2)[:200])
    shutil.copy(good_st, p)

    cfg = {k: v for k, v in good_cfg.items() if k != "n_embd"}
    p = case("config_missing_n_embd", "config.json has no n_embd",
             "GPT2_ERR_FORMAT; names config.json and n_embd", cfg=cfg)
    shutil.copy(good_st, p)

    cfg = dict(good_cfg, n_head=3)
    p = case("config_n_embd_not_divisible", "n_embd 16 with n_head 3",
             "GPT2_ERR_FORMAT; names n_embd and n_head (16 is not a multiple of 3)", cfg=cfg)
    shutil.copy(good_st, p)

    cfg = dict(good_cfg, n_head=0)
    p = case("config_n_head_zero", "n_head 0 (a division by zero if unchecked)",
             "GPT2_ERR_FORMAT; names n_head and the value 0", cfg=cfg)
    shutil.copy(good_st, p)

    cfg = dict(good_cfg, n_layer=1000000000)
    p = case("config_absurd_n_layer", "n_layer 1000000000 (the file holds one layer)",
             "GPT2_ERR_FORMAT; names n_layer (out of range) or the first missing tensor h.1.ln_1.weight; "
             "nothing sized by n_layer is allocated before the check", cfg=cfg)
    shutil.copy(good_st, p)

    cfg = dict(good_cfg, vocab_size=60)
    p = case("config_vocab_mismatch", "vocab_size 60 in config.json, wte.weight holds 50 rows",
             "GPT2_ERR_FORMAT; names wte.weight, the expected [60, 16] and the found [50, 16]", cfg=cfg)
    shutil.copy(good_st, p)

    for key, value, why in [("activation_function", "silu", "an activation GPT-2 models do not use"),
                            ("add_cross_attention", True, "cross-attention layers (an encoder-decoder's)"),
                            ("scale_attn_weights", False, "attention scores not divided by the square root of the head size"),
                            ("tie_word_embeddings", False, "an untied head, but the file holds no lm_head.weight")]:
        cfg = dict(good_cfg, **{key: value})
        p = case("config_%s_%s" % (key, str(value).lower()), "%s = %s in config.json: %s" % (key, json.dumps(value), why),
                 "GPT2_ERR_FORMAT; names config.json and %s" % key, cfg=cfg)
        shutil.copy(good_st, p)

    with open(os.path.join(BAD, "README"), "w") as f:
        f.write("Malformed inputs, made by tools/make_reference.py from tests/models/micro_f32\n"
                "(L1 H2 C16 V50 P16, F32, bare keys). Each directory holds config.json +\n"
                "model.safetensors; everything not named below is the good fixture unchanged.\n"
                "gpt2_load must return the status given, leave *model NULL, never crash or hang,\n"
                "and gpt2_last_error() must name what is listed.\n\n")
        for name, why, expect in cases:
            f.write("%s\n    what: %s\n    must: %s\n\n" % (name, why, expect))
    print("tests/bad: %d cases" % len(cases))


def main():
    torch.manual_seed(0)
    for fx in FIXTURES:
        make_model_fixture(fx)
    make_bad_fixtures()


if __name__ == "__main__":
    main()
