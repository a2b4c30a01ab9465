#!/usr/bin/env python3
"""make_reference.py - regenerate every model fixture of test_gpt2 from scratch.

    python3 tools/make_reference.py          (from the repository root; needs torch,
                                              transformers, safetensors, numpy)
    python3 tools/make_reference.py --family (only the GPT-2 family fixtures below; needs
                                              transformers 5.x and tokenizers too, and
                                              ../shared/gpt2-tokenizer for the tokenizer)

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
With --family, instead (the rest untouched):
  tests/family/NAME/        config.json, weights in the file format NAME says (model.safetensors,
                            safetensors shards + index, pytorch_model.bin, its shards + index),
                            reference.safetensors as above: one fixture per activation_function,
                            n_inner, scale_attn_by_inverse_layer_idx, scale_attn_weights false,
                            reorder_and_upcast_attn, untied and tied heads, each file format
  tests/family_bad/CASE/    malformed family inputs (shards, index, weights formats), with a README
  tests/tokenizer_json/     GPT-2's BPE as a tokenizer.json alone, with added tokens, and the ids and
                            decodes Hugging Face gives (cases.json; cases.txt and added.txt for C)

The reference model is loaded back from the files just written with from_pretrained, so it
sees the weights as stored (after rounding to F16/BF16), upcast to float64. Every greedy step
must win by a margin of at least 1e-2 x (1 + max|logit|) (ten times the CUDA fp32 tolerance),
so a float32 engine reproduces the continuation exactly, and the continuation must hold at
least N/2 distinct tokens (a repeated token would hide KV-cache errors); prompts are redrawn
until both hold. The family fixtures' tokens also have every position's argmax win by at least
0.1 x (1 + max|logit|) (twice the F16/BF16 tolerance), so a half-precision run within that
tolerance agrees at every position; tokens are replaced where needed until that holds.
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

    inner = fx.get("n_inner") or 4 * C
    for i in range(fx["n_layer"]):
        h = "h.%d." % i
        ln(h + "ln_1")
        w[h + "attn.c_attn.weight"] = rng.normal(0, proj, (C, 3 * C))  # Conv1D: [in, out]
        w[h + "attn.c_attn.bias"] = rng.normal(0, 0.1, 3 * C)
        w[h + "attn.c_proj.weight"] = rng.normal(0, proj, (C, C))
        w[h + "attn.c_proj.bias"] = rng.normal(0, 0.1, C)
        ln(h + "ln_2")
        w[h + "mlp.c_fc.weight"] = rng.normal(0, proj, (C, inner))
        w[h + "mlp.c_fc.bias"] = rng.normal(0, 0.1, inner)
        w[h + "mlp.c_proj.weight"] = rng.normal(0, 1.2 / np.sqrt(inner), (inner, C))
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
            "position_min_margin": "%.4g" % position_margin, "tokens_replaced": str(replaced),
            "position_margin_rule": "top1-top2 >= %g*(1+max|logit| of all logits) at every token position" % POSITION_MARGIN,
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
                            ("add_cross_attention", True, "cross-attention layers (an encoder-decoder's)")]:
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


# ------------------------------------------------------------------ the GPT-2 family (--family)
#
# Fixtures for the config fields and file formats of the wider GPT-2 family on the Hub, written to
# tests/family/NAME/ and tests/family_bad/NAME/, and a tokenizer.json-only tokenizer in
# tests/tokenizer_json/. Same reference contract as tests/models: Hugging Face in float64, loaded
# back from the files written.

FAMILY_DIR = os.path.join(ROOT, "tests", "family")
FAMILY_BAD = os.path.join(ROOT, "tests", "family_bad")
TOKENIZER_JSON = os.path.join(ROOT, "tests", "tokenizer_json")
TOKENIZER_SRC = os.path.join(ROOT, "..", "shared", "gpt2-tokenizer")  # encoder.json + vocab.bpe

CUDA_F32_TOL = 1e-3  # DESIGN's CUDA fp32 logit tolerance factor: the "fp32 tolerance" below
HALF_TOL = 5e-2  # the F16/BF16 logit tolerance factor, either backend (test_gpt2.cu's logit_tolerance)
# Every one of the B x T positions of tokens has its argmax win by POSITION_MARGIN x (1 + max|logit|):
# twice the half-precision tolerance, so no run whose every logit is within that tolerance can flip it
# (the test wants the argmax to agree at >= 98% of positions in F16/BF16).
POSITION_MARGIN = 2 * HALF_TOL

# fmt:  st          model.safetensors (safetensors' save_file)
#       st_sharded  model-0000X-of-0000N.safetensors + model.safetensors.index.json (save_pretrained)
#       bin         pytorch_model.bin (torch.save of the state dict: PyTorch's zip format)
#       bin_sharded pytorch_model-0000X-of-0000N.bin + pytorch_model.bin.index.json
#       bin_views   pytorch_model.bin whose tensors are all views into ONE storage (storage offsets)
# head: tied          no lm_head.weight stored
#       tied_shared   lm_head.weight stored as the same tensor as wte (a tied model's state_dict)
#       tied_differs  lm_head.weight stored, random, different from wte, while config.json says tied
#                     (or, tie_key "absent", says nothing). Hugging Face 5.x then does NOT tie: it
#                     warns and runs lm_head.weight as its own matrix (4.46 instead loaded
#                     lm_head.weight into the tied parameter, so wte became lm_head.weight too, and
#                     refused bare keys next to lm_head.weight). The reference is what 5.x does.
#       untied        tie_word_embeddings false, lm_head.weight random: its own matrix
#       "other head" below: logits with wte and with lm_head.weight must differ by > 100x the fp32
#       tolerance, so a loader that picks the wrong one fails
# tie_key: "absent" drops tie_word_embeddings from config.json (Hugging Face's default: true)
# alt:  config overrides that read the model wrongly; min_sep: the logits must then move by more
#       than min_sep x (1 + max|logit|) (None: reported, not required)
# shards: number of shard files (st_sharded, bin_sharded)
FAMILY = [
    dict(name="act_gelu_f32_bare", dtype="F32", layout="bare", fmt="st", act="gelu",
         n_layer=2, n_head=2, n_embd=32, vocab=151, n_positions=32, seed=1211, batch=2, seq=32,
         alt={"activation_function": "gelu_new"}, min_sep=None),
    dict(name="act_gelu_fast_f16_prefixed", dtype="F16", layout="prefixed", fmt="st", act="gelu_fast",
         n_layer=2, n_head=4, n_embd=48, vocab=150, n_positions=32, seed=1150, batch=2, seq=32,
         alt={"activation_function": "gelu"}, min_sep=None),
    dict(name="act_quick_gelu_bf16_bare", dtype="BF16", layout="bare", fmt="st", act="quick_gelu",
         n_layer=2, n_head=2, n_embd=48, vocab=199, n_positions=32, seed=1199, batch=2, seq=32,
         alt={"activation_function": "gelu_new"}, min_sep=2 * CUDA_F32_TOL),
    dict(name="act_relu_f32_prefixed", dtype="F32", layout="prefixed", fmt="st", act="relu",
         n_layer=2, n_head=2, n_embd=32, vocab=173, n_positions=32, seed=1173, batch=2, seq=32,
         alt={"activation_function": "gelu_new"}, min_sep=2 * CUDA_F32_TOL),
    dict(name="act_gelu_pytorch_tanh_bf16_prefixed", dtype="BF16", layout="prefixed", fmt="st",
         act="gelu_pytorch_tanh", n_layer=2, n_head=4, n_embd=48, vocab=171, n_positions=32,
         seed=1230, batch=2, seq=32, alt={"activation_function": "gelu"}, min_sep=None),
    dict(name="n_inner_153_f16_bare", dtype="F16", layout="bare", fmt="st", n_inner=153,
         n_layer=2, n_head=4, n_embd=48, vocab=163, n_positions=32, seed=1163, batch=2, seq=32),
    dict(name="scale_attn_by_inverse_layer_idx_f32_prefixed", dtype="F32", layout="prefixed", fmt="st",
         cfg={"scale_attn_by_inverse_layer_idx": True},
         n_layer=4, n_head=2, n_embd=32, vocab=127, n_positions=32, seed=1127, batch=2, seq=32,
         alt={"scale_attn_by_inverse_layer_idx": False}, min_sep=10 * CUDA_F32_TOL),
    dict(name="scale_attn_weights_false_f32_bare", dtype="F32", layout="bare", fmt="st",
         cfg={"scale_attn_weights": False},
         n_layer=2, n_head=2, n_embd=32, vocab=139, n_positions=32, seed=1139, batch=2, seq=32,
         alt={"scale_attn_weights": True}, min_sep=10 * CUDA_F32_TOL),
    dict(name="reorder_and_upcast_attn_bf16_bare", dtype="BF16", layout="bare", fmt="st",
         cfg={"reorder_and_upcast_attn": True},
         n_layer=2, n_head=4, n_embd=48, vocab=181, n_positions=32, seed=1181, batch=2, seq=32),
    dict(name="untied_head_f32_prefixed", dtype="F32", layout="prefixed", fmt="st", head="untied",
         tie_key="false", n_layer=2, n_head=2, n_embd=32, vocab=157, n_positions=32, seed=1157,
         batch=2, seq=32),
    dict(name="tied_config_lm_head_differs_f16_prefixed", dtype="F16", layout="prefixed", fmt="st",
         head="tied_differs", tie_key="absent", n_layer=2, n_head=4, n_embd=48, vocab=149, n_positions=32,
         seed=1149, batch=2, seq=32),
    dict(name="sharded_safetensors_f32_prefixed", dtype="F32", layout="prefixed", fmt="st_sharded",
         shards=3, n_layer=3, n_head=2, n_embd=32, vocab=131, n_positions=32, seed=1131, batch=2, seq=32),
    dict(name="bin_f32_bare_buffers", dtype="F32", layout="bare", fmt="bin", buffers=True,
         n_layer=2, n_head=2, n_embd=32, vocab=113, n_positions=32, seed=1113, batch=2, seq=32),
    dict(name="bin_f16_prefixed_tied_shared", dtype="F16", layout="prefixed", fmt="bin", head="tied_shared",
         n_layer=2, n_head=4, n_embd=48, vocab=167, n_positions=32, seed=1167, batch=2, seq=32),
    dict(name="bin_sharded_bf16_prefixed", dtype="BF16", layout="prefixed", fmt="bin_sharded", shards=3,
         n_layer=3, n_head=4, n_embd=48, vocab=191, n_positions=32, seed=1191, batch=2, seq=32),
    dict(name="bin_views_f16_bare", dtype="F16", layout="bare", fmt="bin_views",
         n_layer=2, n_head=2, n_embd=48, vocab=109, n_positions=32, seed=1109, batch=2, seq=32),
]
FAMILY_DEFAULTS = dict(act="gelu_new", n_inner=None, cfg={}, head="tied", tie_key="true", buffers=False,
                       eps=1e-5, prompt=8, new=12, alt=None, min_sep=None, shards=1)


def family_config(fx):
    return GPT2Config(vocab_size=fx["vocab"], n_positions=fx["n_positions"], n_embd=fx["n_embd"],
                      n_layer=fx["n_layer"], n_head=fx["n_head"], n_inner=fx["n_inner"],
                      layer_norm_epsilon=fx["eps"], activation_function=fx["act"],
                      bos_token_id=fx["vocab"] - 1, eos_token_id=fx["vocab"] - 1,
                      tie_word_embeddings=fx["tie_key"] != "false", **fx["cfg"])


def write_config(d, fx):
    """config.json as GPT2Config writes it; tie_key "absent" then drops tie_word_embeddings."""
    family_config(fx).save_pretrained(d)
    path = os.path.join(d, "config.json")
    cfg = json.load(open(path))
    if fx["tie_key"] == "absent":
        del cfg["tie_word_embeddings"]
    with open(path, "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def family_tensors(fx):
    """The state dict as it is stored: dtype, key layout, buffers, lm_head (an OrderedDict in
    Hugging Face's module order, which is what torch.save and the shard split see)."""
    from collections import OrderedDict
    w64 = random_weights(fx)
    dt = TORCH_DTYPE[fx["dtype"]]
    prefix = "transformer." if fx["layout"] == "prefixed" else ""
    out = OrderedDict()
    for k, v in w64.items():
        out[prefix + k] = torch.from_numpy(v).to(dt).contiguous()
        if fx["buffers"] and k.endswith("attn.c_proj.bias"):  # where GPT-2's own .bin has them
            P, layer = fx["n_positions"], k.split(".")[1]
            out[prefix + "h.%s.attn.bias" % layer] = torch.tril(torch.ones(P, P, dtype=torch.float32)).view(1, 1, P, P)
            out[prefix + "h.%s.attn.masked_bias" % layer] = torch.tensor(-1e4, dtype=torch.float32)
    if fx["head"] == "tied_shared":
        out["lm_head.weight"] = out[prefix + "wte.weight"]  # the same tensor object, as state_dict() gives
    elif fx["head"] in ("tied_differs", "untied"):
        rng = np.random.default_rng(fx["seed"] + 7)
        out["lm_head.weight"] = torch.from_numpy(rng.normal(0, 0.1, (fx["vocab"], fx["n_embd"]))).to(dt).contiguous()
    return out


def split_shards(tensors, n):
    """Tensors in order, cut into n groups of about equal bytes (shared tensors count once)."""
    sizes = [(k, v.numel() * v.element_size()) for k, v in tensors.items()]
    total = sum(s for _, s in sizes)
    groups, cur, acc = [], [], 0
    for k, s in sizes:
        if cur and acc + s > total / n * (len(groups) + 1) and len(groups) < n - 1:
            groups.append(cur)
            cur = []
        cur.append(k)
        acc += s
    groups.append(cur)
    if len(groups) != n:
        sys.exit("split_shards: %d groups, wanted %d" % (len(groups), n))
    return groups, total


def write_index(path, weight_map, total):
    with open(path, "w") as f:
        f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
                           indent=2) + "\n")


def write_family_weights(d, fx, stored):
    fmt = fx["fmt"]
    if fmt == "st":
        save_file(dict(stored), os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    elif fmt == "st_sharded":
        # save_pretrained's own sharding: the model in the file dtype, every parameter set from stored
        model = GPT2LMHeadModel(family_config(fx)).to(TORCH_DTYPE[fx["dtype"]])
        missing, unexpected = model.load_state_dict(stored, strict=False)
        if unexpected or [k for k in missing if k != "lm_head.weight"]:
            sys.exit("%s: state dict mismatch: missing %s unexpected %s" % (fx["name"], missing, unexpected))
        total = sum(v.numel() * v.element_size() for v in stored.values())
        for step in range(100):  # the smallest shard size (in steps of 1%) that gives fx["shards"] files
            limit = int(total / fx["shards"] * (1 + 0.01 * step))
            tmp = d + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            model.save_pretrained(tmp, max_shard_size=limit)
            n = len([f for f in os.listdir(tmp) if f.endswith(".safetensors")])
            if n == fx["shards"]:
                break
            if n < fx["shards"]:
                sys.exit("%s: save_pretrained made %d shards" % (fx["name"], n))
        else:
            sys.exit("%s: no shard size gives %d shards" % (fx["name"], fx["shards"]))
        for f in sorted(os.listdir(tmp)):
            if f != "config.json":  # config.json is written by write_config
                shutil.move(os.path.join(tmp, f), os.path.join(d, f))
        shutil.rmtree(tmp)
    elif fmt == "bin":
        torch.save(stored, os.path.join(d, "pytorch_model.bin"))
    elif fmt == "bin_sharded":
        from collections import OrderedDict
        groups, total = split_shards(stored, fx["shards"])
        weight_map = {}
        for i, keys in enumerate(groups):
            name = "pytorch_model-%05d-of-%05d.bin" % (i + 1, len(groups))
            torch.save(OrderedDict((k, stored[k]) for k in keys), os.path.join(d, name))
            weight_map.update({k: name for k in keys})
        write_index(os.path.join(d, "pytorch_model.bin.index.json"), weight_map, total)
    elif fmt == "bin_views":
        from collections import OrderedDict
        flat = torch.cat([v.reshape(-1) for v in stored.values()])
        views, off = OrderedDict(), 0
        for k, v in stored.items():
            views[k] = flat[off:off + v.numel()].view(v.shape)
            off += v.numel()
        torch.save(views, os.path.join(d, "pytorch_model.bin"))
    else:
        sys.exit("unknown fmt " + fmt)


def load_family(d, dtype=torch.float64, **overrides):
    model, info = GPT2LMHeadModel.from_pretrained(d, dtype=dtype, attn_implementation="eager",
                                                  output_loading_info=True, **overrides)
    if info["missing_keys"] or info["mismatched_keys"]:
        sys.exit("%s: HF reports missing %s mismatched %s" % (d, info["missing_keys"], info["mismatched_keys"]))
    return model.eval()


def forward_logits(model, tokens):
    with torch.no_grad():
        return model(torch.from_numpy(tokens), use_cache=False).logits


def check_family_loaded(model, stored, fx):
    """Every stored weight reached HF's model bit for bit; lm_head is wte unless untied."""
    prefix = "transformer." if fx["layout"] == "prefixed" else ""
    sd = model.state_dict()
    for k, v in stored.items():
        if k.endswith("attn.bias") and v.dim() == 4 or k.endswith("masked_bias") or k == "lm_head.weight":
            continue
        if not torch.equal(sd["transformer." + k[len(prefix):]], v.to(torch.float64)):
            sys.exit("%s: HF loaded %s differently from what was stored" % (fx["name"], k))
    own = fx["head"] in ("untied", "tied_differs")
    want = stored["lm_head.weight"] if own else stored[prefix + "wte.weight"]
    if not torch.equal(sd["lm_head.weight"], want.to(torch.float64)):
        sys.exit("%s: HF's lm_head is not %s" % (fx["name"], "the stored lm_head.weight" if own else "wte"))
    if own and model.lm_head.weight is model.transformer.wte.weight:
        sys.exit("%s: HF tied lm_head to wte" % fx["name"])


def position_margins(logits, scale):
    """top1 - top2 at every position, over scale."""
    top = logits.topk(2, dim=-1).values
    return (top[..., 0] - top[..., 1]) / scale


def decisive_row(model, row, scale, rng, beam=16):
    """row with tokens replaced where its positions' argmax win by less than POSITION_MARGIN x scale (or x their
    own 1 + max|logit|, if larger). A position's logits depend on its prefix only, so a beam search runs position
    by position: each of up to `beam` prefixes is extended by every token of the vocabulary, the extensions that
    clear the margin survive, those that keep most of row's own tokens first (ties in a random order; at most two
    of one prefix ahead of the others' extensions). Late positions depend little on their own token, so one prefix
    alone can run out of tokens that clear it; where every prefix of the beam does, the search starts again with a
    beam four times as wide."""
    T, V = len(row), model.config.vocab_size
    beams = [(np.zeros(0, dtype=row.dtype), 0)]  # (prefix, tokens of row kept)
    for t in range(T):
        seqs = np.concatenate([np.concatenate([np.repeat(p[None], V, axis=0), np.arange(V)[:, None]], axis=1)
                               for p, _ in beams]).astype(row.dtype)
        with torch.no_grad():  # the prefixes once, through the KV cache, then every next token of each
            cache = None
            if t:
                cache = model(torch.from_numpy(np.stack([p for p, _ in beams])), use_cache=True).past_key_values
                cache.batch_repeat_interleave(V)
            last = model(torch.from_numpy(seqs[:, t:]), past_key_values=cache, use_cache=True).logits[:, 0]
        bar = POSITION_MARGIN * torch.clamp(1 + last.abs().amax(dim=-1), min=scale)
        ok = (position_margins(last, 1) >= bar).nonzero().flatten().tolist()
        if not ok:
            if beam >= 1024:
                sys.exit("no tokens give argmax margins >= %g up to position %d (beam %d)" % (POSITION_MARGIN, t, beam))
            return decisive_row(model, row, scale, rng, 4 * beam)
        kept = [beams[i // V][1] + (i % V == row[t]) for i in ok]
        tie = rng.permutation(len(ok))
        ranked = sorted(range(len(ok)), key=lambda j: (-kept[j], tie[j]))
        children, best = {}, []
        for j in ranked:  # at most 2 extensions of one prefix while others have some: the beam stays varied
            if children.get(ok[j] // V, 0) < 2:
                children[ok[j] // V] = children.get(ok[j] // V, 0) + 1
                best.append(j)
        chosen = set(best)
        best = (best + [j for j in ranked if j not in chosen])[:beam]
        beams = [(seqs[ok[j]], kept[j]) for j in best]
    return beams[0][0]


def decisive_tokens(model, tokens, rng):
    """tokens with few replaced (decisive_row) so that every position's argmax wins by
    POSITION_MARGIN x (1 + max|logit|) of the whole batch; repeated while the final scale moves the bar.
    Returns the tokens and how many differ from those given."""
    out = tokens.copy()
    for _ in range(10):
        logits = forward_logits(model, out)
        scale = 1 + float(logits.abs().max())
        if float(position_margins(logits, scale).min()) >= POSITION_MARGIN:
            return out, int((out != tokens).sum())
        out = np.stack([decisive_row(model, r, scale, rng) for r in out])
    sys.exit("tokens: argmax margins >= %g not reached in 10 rounds" % POSITION_MARGIN)


def make_family_fixture(fx):
    fx = dict(FAMILY_DEFAULTS, **fx)
    d = os.path.join(FAMILY_DIR, fx["name"])
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    torch.manual_seed(0)
    write_config(d, fx)
    stored = family_tensors(fx)
    write_family_weights(d, fx, stored)

    # the reference: Hugging Face in float64; reorder_and_upcast_attn's own path computes the scores
    # in float32 (and refuses float64), so the float64 reference runs the same math with it off and
    # the float32 runs of both paths must agree
    upcast = bool(fx["cfg"].get("reorder_and_upcast_attn"))
    model = load_family(d, **({"reorder_and_upcast_attn": False} if upcast else {}))
    check_family_loaded(model, stored, fx)
    rng = np.random.default_rng(fx["seed"] + 1)
    tokens = rng.integers(0, fx["vocab"], (fx["batch"], fx["seq"]))
    tokens, replaced = decisive_tokens(model, tokens, np.random.default_rng(fx["seed"] + 2))
    logits = forward_logits(model, tokens)
    scale = 1 + float(logits.abs().max())
    position_margin = float(position_margins(logits, scale).min())
    notes = {}

    # the head HF used, computed by hand from the final hidden states
    with torch.no_grad():
        hidden = model.transformer(torch.from_numpy(tokens), use_cache=False).last_hidden_state
    prefix = "transformer." if fx["layout"] == "prefixed" else ""
    own = fx["head"] in ("untied", "tied_differs")
    head = stored["lm_head.weight"] if own else stored[prefix + "wte.weight"]
    by_hand = hidden @ head.to(torch.float64).t()
    if float((by_hand - logits).abs().max()) > 1e-9 * scale:
        sys.exit("%s: HF's logits are not the final hidden states times %s" % (fx["name"], "lm_head" if own else "wte"))
    if "lm_head.weight" in stored:
        other = stored[prefix + "wte.weight"] if own else stored["lm_head.weight"]
        sep = float((hidden @ other.to(torch.float64).t() - logits).abs().max()) / scale
        notes["other_head_separation"] = "%.3g" % sep
        if fx["head"] != "tied_shared" and sep <= 100 * CUDA_F32_TOL:
            sys.exit("%s: the other head moves logits by only %.3g x (1+max|logit|)" % (fx["name"], sep))

    if upcast:
        f32 = [forward_logits(load_family(d, dtype=torch.float32, reorder_and_upcast_attn=flag), tokens)
               for flag in (True, False)]
        diff = float((f32[0] - f32[1]).abs().max()) / scale
        err = float((f32[0].double() - logits).abs().max()) / scale
        notes["upcast_path_f32_vs_plain_f32"] = "%.3g" % diff
        notes["upcast_path_f32_vs_reference"] = "%.3g" % err
        if diff > 1e-5 or err > 1e-5:
            sys.exit("%s: reorder_and_upcast_attn's path differs: %.3g / %.3g" % (fx["name"], diff, err))

    if fx["alt"]:
        alt = forward_logits(load_family(d, **fx["alt"]), tokens)
        sep = float((alt - logits).abs().max()) / scale
        notes["wrong_reading"] = json.dumps(fx["alt"], sort_keys=True)
        notes["wrong_reading_separation"] = "%.3g" % sep
        if fx["min_sep"] is not None and sep <= fx["min_sep"]:
            sys.exit("%s: reading it as %s moves logits by only %.3g x (1+max|logit|), need > %g"
                     % (fx["name"], fx["alt"], sep, fx["min_sep"]))

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
    layout = fx["layout"] + ("+buffers" if fx["buffers"] else "") + ("" if fx["head"] == "tied" else "+lm_head_" + fx["head"])
    meta = {"dtype": fx["dtype"], "layout": layout, "format": fx["fmt"], "generator": "tools/make_reference.py --family",
            "reference": "transformers %s GPT2LMHeadModel, float64, eager attention" % transformers.__version__,
            "torch": torch.__version__, "greedy_min_margin": "%.4g" % margin,
            "greedy_margin_rule": "top1-top2 >= %g*(1+max|logit|)" % MARGIN,
            "position_min_margin": "%.4g" % position_margin, "tokens_replaced": str(replaced),
            "position_margin_rule": "top1-top2 >= %g*(1+max|logit| of all logits) at every token position" % POSITION_MARGIN,
            "prompt_attempts": str(attempt + 1), "activation_function": fx["act"],
            "config_fields": json.dumps(dict(fx["cfg"], n_inner=fx["n_inner"], tie_word_embeddings=fx["tie_key"]), sort_keys=True)}
    meta.update(notes)
    write_safetensors(os.path.join(d, "reference.safetensors"), ref, meta)
    sizes = {f: os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)}
    print("%-44s %-4s %-9s %-11s %-24s L%d C%d V%d  max|logit| %.2f  margin %.3g  positions %.3g (%d tokens replaced)  %s  largest file %d, total %d bytes"
          % (fx["name"], fx["dtype"], fx["layout"], fx["fmt"], fx["act"], fx["n_layer"], fx["n_embd"], fx["vocab"],
             scale - 1, margin, position_margin, replaced, " ".join("%s=%s" % kv for kv in sorted(notes.items()) if "separation" in kv[0] or "upcast" in kv[0]),
             max(sizes.values()), sum(sizes.values())))
    return sizes


def make_family_bad():
    """Malformed family inputs, each a full copy of a small sharded model with one thing wrong."""
    shutil.rmtree(FAMILY_BAD, ignore_errors=True)
    os.makedirs(FAMILY_BAD)
    base = dict(FAMILY_DEFAULTS, name="family_bad_base", dtype="F32", layout="prefixed", fmt="st_sharded",
                shards=3, n_layer=2, n_head=2, n_embd=16, vocab=50, n_positions=16, seed=4242)
    src = os.path.join(FAMILY_BAD, ".base")
    os.makedirs(src)
    write_config(src, base)
    stored = family_tensors(base)
    write_family_weights(src, base, stored)
    load_family(src)  # the unbroken base loads in HF
    bin_base = dict(base, fmt="bin_sharded")
    bin_src = os.path.join(FAMILY_BAD, ".bin_base")
    os.makedirs(bin_src)
    write_config(bin_src, bin_base)
    write_family_weights(bin_src, bin_base, stored)
    load_family(bin_src)
    index = json.load(open(os.path.join(src, "model.safetensors.index.json")))
    wm = index["weight_map"]
    shards = sorted(set(wm.values()))
    cases = []

    def case(name, why, expect, source=src):
        d = os.path.join(FAMILY_BAD, name)
        shutil.copytree(source, d)
        cases.append((name, why, expect))
        return d

    def rewrite_index(d, weight_map):
        write_index(os.path.join(d, "model.safetensors.index.json"), weight_map, index["metadata"]["total_size"])

    def shard_tensors(path):
        with safe_open(path, "pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()

    d = case("shard_file_missing", "model.safetensors.index.json maps tensors to %s, which is not in the directory" % shards[1],
             "GPT2_ERR_IO; names %s (and the index)" % shards[1])
    os.remove(os.path.join(d, shards[1]))

    name = "transformer.h.0.ln_1.weight"
    home = wm[name]
    other = [s for s in shards if s != home][0]
    d = case("tensor_in_two_shards", "%s is stored in %s (where the index maps it) and also in %s" % (name, home, other),
             "GPT2_ERR_FORMAT; names %s and both shard files" % name)
    t, meta = shard_tensors(os.path.join(d, other))
    t[name] = stored[name].clone()
    save_file(t, os.path.join(d, other), metadata=meta)

    name = "transformer.wte.weight"
    wrong = [s for s in shards if s != wm[name]][-1]
    d = case("weight_map_wrong_shard", "the index maps %s to %s; the tensor is in %s" % (name, wrong, wm[name]),
             "GPT2_ERR_FORMAT; names %s and %s" % (name, wrong))
    rewrite_index(d, dict(wm, **{name: wrong}))

    name = "transformer.ln_f.bias"
    d = case("weight_map_dotdot", "the index maps %s to \"../%s\" (a path outside the model directory)" % (name, wm[name]),
             "GPT2_ERR_FORMAT; names model.safetensors.index.json and the shard name \"../%s\"; opens nothing "
             "outside the directory" % wm[name])
    rewrite_index(d, dict(wm, **{name: "../" + wm[name]}))

    d = case("index_not_json", "model.safetensors.index.json cut off in the middle",
             "GPT2_ERR_FORMAT; names model.safetensors.index.json and says it is not valid JSON")
    text = open(os.path.join(d, "model.safetensors.index.json")).read()
    open(os.path.join(d, "model.safetensors.index.json"), "w").write(text[:len(text) // 2])

    bin_index = json.load(open(os.path.join(bin_src, "pytorch_model.bin.index.json")))
    bin_shards = sorted(set(bin_index["weight_map"].values()))
    d = case("bin_shard_file_missing", "pytorch_model.bin.index.json maps tensors to %s, which is not in the directory"
             % bin_shards[2], "GPT2_ERR_IO; names %s" % bin_shards[2], source=bin_src)
    os.remove(os.path.join(d, bin_shards[2]))

    for fname, data in [("tf_model.h5", b"\x89HDF\r\n\x1a\n" + bytes(56)),
                        ("flax_model.msgpack", b"\x81\xabtransformer\x80")]:
        d = os.path.join(FAMILY_BAD, "only_" + fname.replace(".", "_"))
        os.makedirs(d)
        shutil.copy(os.path.join(src, "config.json"), d)
        open(os.path.join(d, fname), "wb").write(data)
        cases.append(("only_" + fname.replace(".", "_"),
                      "config.json and %s (%d bytes, a stand-in), no model.safetensors or pytorch_model.bin" % (fname, len(data)),
                      "GPT2_ERR_IO; names %s and says to provide model.safetensors or pytorch_model.bin" % fname))

    d = case("activation_function_mish", "activation_function = \"mish\" (Hugging Face knows it; GPT-2 models do not use it)",
             "GPT2_ERR_FORMAT; names config.json, activation_function and mish")
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["activation_function"] = "mish"
    open(os.path.join(d, "config.json"), "w").write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

    d = case("untied_without_lm_head", "tie_word_embeddings = false in config.json, and no shard holds lm_head.weight",
             "GPT2_ERR_FORMAT; names lm_head.weight (and tie_word_embeddings)")
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["tie_word_embeddings"] = False
    open(os.path.join(d, "config.json"), "w").write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

    shutil.rmtree(src)
    shutil.rmtree(bin_src)
    with open(os.path.join(FAMILY_BAD, "README"), "w") as f:
        f.write("Malformed family inputs, made by tools/make_reference.py --family from a small model\n"
                "(L2 H2 C16 V50 P16, F32, prefixed keys) saved by save_pretrained in 3 safetensors shards\n"
                "with model.safetensors.index.json (bin_* cases: 3 pytorch_model-0000X-of-00003.bin shards\n"
                "with pytorch_model.bin.index.json). Everything not named below is that model unchanged.\n"
                "gpt2_load must return the status given, leave *model NULL, never crash or hang,\n"
                "and gpt2_last_error() must name what is listed.\n\n")
        for name, why, expect in cases:
            f.write("%s\n    what: %s\n    must: %s\n\n" % (name, why, expect))
    print("tests/family_bad: %d cases" % len(cases))


# texts for the tokenizer.json fixture: plain text, the added tokens' strings alone, glued to
# text, with spaces and newlines around them, twice in a row, and a near miss
TOKENIZER_TEXTS = [
    "Hello, world!",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<tool_call>",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "a<|endoftext|>b",
    " <|im_end|> ",
    "<|im_end|><|im_end|>",
    "x <tool_call> y",
    "<tool_call>{\"name\": \"f\"}",
    "<|im_start",
    "<|IM_START|>",
    "caf\u00e9 \u65e5\u672c 🙂<|im_end|>",
]


def make_tokenizer_json():
    """tests/tokenizer_json/: GPT-2's BPE as a tokenizer.json only (no vocab.json/merges.txt), with
    added tokens, and cases.json: Hugging Face's ids and decodes for TOKENIZER_TEXTS."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import GPT2TokenizerFast
    shutil.rmtree(TOKENIZER_JSON, ignore_errors=True)
    os.makedirs(TOKENIZER_JSON)
    src = os.path.abspath(TOKENIZER_SRC)
    # GPT-2's tokenizer.json as the Hub's gpt2 repository has it: byte-level BPE, no prefix space,
    # <|endoftext|> an added special token (id 50256, in the vocabulary already)
    tk = Tokenizer(models.BPE.from_file(os.path.join(src, "encoder.json"), os.path.join(src, "vocab.bpe")))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    tk.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    # a fine-tune's additions: two special tokens (chat markers) and one ordinary added token
    tk.add_special_tokens([AddedToken("<|im_start|>", special=True, normalized=False),
                           AddedToken("<|im_end|>", special=True, normalized=False)])
    tk.add_tokens([AddedToken("<tool_call>", special=False, normalized=False)])
    path = os.path.join(TOKENIZER_JSON, "tokenizer.json")
    with open(path, "w") as f:
        f.write(tk.to_str(pretty=False))
    hf = GPT2TokenizerFast(tokenizer_file=path)
    plain = GPT2TokenizerFast(tokenizer_file=path)
    cases = []
    for text in TOKENIZER_TEXTS:
        ids = hf.encode(text)
        # split_special_tokens: special tokens' strings as ordinary text (what encode_ordinary does);
        # ordinary added tokens (<tool_call>) still match
        split = hf(text, split_special_tokens=True)["input_ids"]
        base = tk.model  # the bare BPE, no added tokens at all
        bare = []
        for piece, _ in tk.pre_tokenizer.pre_tokenize_str(text):
            bare += [t.id for t in base.tokenize(piece)]
        cases.append({"text": text, "ids": ids, "ids_special_as_text": split, "ids_bpe_only": bare,
                      "decode": hf.decode(ids), "decode_skip_special": hf.decode(ids, skip_special_tokens=True)})
        if hf.decode(ids) != text or plain.decode(bare) != text:
            sys.exit("tokenizer_json: %r does not decode back to itself" % text)
    added = [{"id": a["id"], "content": a["content"], "special": a["special"]}
             for a in json.loads(tk.to_str())["added_tokens"]]
    with open(os.path.join(TOKENIZER_JSON, "cases.json"), "w") as f:
        f.write(json.dumps({"generator": "tools/make_reference.py --family",
                            "reference": "transformers %s GPT2TokenizerFast(tokenizer_file=tokenizer.json), "
                                         "tokenizers %s" % (transformers.__version__, __import__("tokenizers").__version__),
                            "fields": {"ids": "hf.encode(text): added tokens matched, special ones as single ids",
                                       "ids_special_as_text": "hf(text, split_special_tokens=True): special tokens' "
                                                              "strings encoded as ordinary text; ordinary added tokens still match",
                                       "ids_bpe_only": "the byte-level BPE alone, no added token matched",
                                       "decode": "hf.decode(ids)",
                                       "decode_skip_special": "hf.decode(ids, skip_special_tokens=True)"},
                            "vocab_size": hf.vocab_size, "len": len(hf), "added_tokens": added,
                            "cases": cases}, indent=1, ensure_ascii=False) + "\n")
    # the same cases in tests/tokenizer/cases.txt's line format ("text <UTF-8 hex> <id>..."), for C:
    # cases.txt: the BPE alone (added tokens' strings as ordinary text, as gpt2_encode treats
    # <|endoftext|>); added.txt: Hugging Face's ids with the added tokens matched, which must decode
    # back to the text
    for fname, field, what in [("cases.txt", "ids_bpe_only", "the byte-level BPE alone, no added token matched"),
                               ("added.txt", "ids", "Hugging Face's encode: added tokens matched (single ids); decodes to the text")]:
        with open(os.path.join(TOKENIZER_JSON, fname), "w") as f:
            f.write("# tools/make_reference.py --family: tests/tokenizer_json/tokenizer.json, %s\n" % what)
            for c in cases:
                f.write("text %s %s\n" % (c["text"].encode().hex() or "-", " ".join(map(str, c[field]))))
    print("tests/tokenizer_json: tokenizer.json %d bytes, %d cases, %d added tokens"
          % (os.path.getsize(path), len(cases), len(added)))


def make_family():
    if int(transformers.__version__.split(".")[0]) < 5:
        sys.exit("--family needs transformers 5.x (4.x treats a differing lm_head.weight of a tied model otherwise)")
    torch.manual_seed(0)
    shutil.rmtree(FAMILY_DIR, ignore_errors=True)
    os.makedirs(FAMILY_DIR)
    for fx in FAMILY:
        make_family_fixture(fx)
    make_family_bad()
    make_tokenizer_json()


def main():
    if sys.argv[1:] == ["--family"]:
        make_family()
        return
    if sys.argv[1:]:
        sys.exit("usage: tools/make_reference.py [--family]")
    torch.manual_seed(0)
    for fx in FIXTURES:
        make_model_fixture(fx)
    make_bad_fixtures()


if __name__ == "__main__":
    main()
