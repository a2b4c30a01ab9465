#!/usr/bin/env python3
"""train_tiny.py - train the embedded default model (weights/) on Tiny Shakespeare.

    python3 tools/train_tiny.py --data tinyshakespeare.txt --out DIR    (CUDA GPU; ~5 min on an H100)
    python3 tools/train_tiny.py --finish DIR                             (CPU is enough)

The first form tokenizes the corpus with GPT-2's own BPE (weights/vocab.json + merges.txt,
through tiktoken, offline), splits it 90/10 by characters (the first 90% trains), trains a few
GPT-2-shaped candidates (n_embd 128, so the 50257-row embedding leaves room for the layers in a
16 MB F16 file), keeps the one with the lowest validation loss, and writes into DIR:
  config.json, model.safetensors    Hugging Face layout as GPT2LMHeadModel.save_pretrained
                                    writes it, F16, lm_head tied to wte
  train_log.json                    what each candidate did
then finishes (the second form does only this part, from what the first wrote):
  reference.safetensors             made like tests/models/*/reference.safetensors by
                                    tools/make_reference.py: float64 HF logits and greedy tokens
  TRAINING.md                       command, date, device, losses, a 200-token sample
"""
import argparse
import copy
import datetime
import json
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import tiktoken
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tiktoken.load import data_gym_to_mergeable_bpe_ranks
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_reference  # noqa: E402  (the fixtures' float64 reference, reused as is)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EOT = 50256
N_CTX = 1024          # trained at full length, so the demo can run to 1024 tokens
N_EMBD, N_HEAD = 128, 4
MAX_BYTES = 16_000_000

# (n_layer, dropout, steps, peak lr), tried in this order while the time budget lasts
# (one epoch of the train split is about 19 steps of 16 x 1024 tokens)
CANDIDATES = [
    (6, 0.2, 800, 2e-3),
    (6, 0.2, 400, 2e-3),
    (6, 0.3, 1600, 2e-3),
    (4, 0.2, 800, 2e-3),
    (6, 0.1, 800, 2e-3),
    (6, 0.2, 800, 1e-3),
]


def gpt2_encoding():
    """GPT-2's BPE from the two files in weights/, no network."""
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(ROOT, "weights", "merges.txt"),
        encoder_json_file=os.path.join(ROOT, "weights", "vocab.json"))
    pattern = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    return tiktoken.Encoding("gpt2", pat_str=pattern, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOT})


def split_corpus(path, enc):
    text = open(path, encoding="utf-8").read()
    cut = int(0.9 * len(text))
    train = np.array(enc.encode_ordinary(text[:cut]), dtype=np.int64)
    val = np.array(enc.encode_ordinary(text[cut:]), dtype=np.int64)
    return train, val


def windows(tokens, block):
    """Non-overlapping (input, target) windows covering tokens: [n, block] each."""
    n = (len(tokens) - 1) // block
    x = torch.from_numpy(tokens[:n * block].reshape(n, block))
    y = torch.from_numpy(tokens[1:n * block + 1].reshape(n, block))
    return x, y


@torch.no_grad()
def mean_loss(model, xy, batch, dev, autocast=True):
    model.eval()
    x, y = xy
    total, count = 0.0, 0
    for i in range(0, len(x), batch):
        xb, yb = x[i:i + batch].to(dev), y[i:i + batch].to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast and dev.type == "cuda"):
            logits = model(xb).logits
        total += F.cross_entropy(logits.float().view(-1, logits.size(-1)), yb.view(-1), reduction="sum").item()
        count += yb.numel()
    model.train()
    return total / count


def gpt2_config(n_layer, dropout):
    return GPT2Config(vocab_size=50257, n_positions=N_CTX, n_embd=N_EMBD, n_layer=n_layer, n_head=N_HEAD,
                      resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                      bos_token_id=EOT, eos_token_id=EOT)


def train_candidate(cand, train, val_xy, args, dev, seed, deadline):
    n_layer, dropout, steps, lr = cand
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(gpt2_config(n_layer, dropout)).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), fused=dev.type == "cuda")
    warmup = max(20, steps // 20)
    rng = np.random.default_rng(seed)
    best = (float("inf"), -1, None)
    history, ema, t0 = [], None, time.time()
    for step in range(steps + 1):
        if step % args.eval_every == 0 or step == steps:
            val = mean_loss(model, val_xy, args.batch, dev)
            history.append((step, round(ema, 4) if ema else None, round(val, 4)))
            if val < best[0]:
                best = (val, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            print("  L%d drop %.1f lr %g  step %4d/%d  train %.3f  val %.3f  %.0fs"
                  % (n_layer, dropout, lr, step, steps, ema or float("nan"), val, time.time() - t0), flush=True)
        if step == steps or time.time() > deadline:
            break
        frac = step / warmup if step < warmup else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))
        for g in opt.param_groups:
            g["lr"] = lr * min(1.0, frac)
        ix = rng.integers(0, len(train) - args.block - 1, args.batch)
        x = torch.from_numpy(np.stack([train[i:i + args.block] for i in ix])).to(dev)
        y = torch.from_numpy(np.stack([train[i + 1:i + 1 + args.block] for i in ix])).to(dev)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = model(x).logits
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
    model.load_state_dict(best[2])
    return model, dict(n_layer=n_layer, dropout=dropout, steps=steps, lr=lr, best_val=round(best[0], 4),
                       best_step=best[1], seconds=round(time.time() - t0, 1), history=history)


def train(args):
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    enc = gpt2_encoding()
    train_tok, val_tok = split_corpus(args.data, enc)
    print("tokens: train %d, val %d" % (len(train_tok), len(val_tok)), flush=True)
    val_xy = windows(val_tok, args.block)
    start, runs, best_model, best_run = time.time(), [], None, None
    for i, cand in enumerate(CANDIDATES[:args.candidates]):
        if runs:  # skip a candidate that would overrun the budget, judged by the runs so far
            per_step = sum(r["seconds"] for r in runs) / sum(r["steps"] for r in runs)
            if time.time() - start + per_step * cand[2] * 1.1 > args.budget_s:
                print("skip", cand, "(time budget)", flush=True)
                continue
        model, run = train_candidate(cand, train_tok, val_xy, args, dev, seed=1234 + i,
                                     deadline=start + args.budget_s)
        runs.append(run)
        if best_run is None or run["best_val"] < best_run["best_val"]:
            best_model, best_run = model, run
        print("candidate", {k: v for k, v in run.items() if k != "history"}, flush=True)

    best_run["train_loss_full"] = round(mean_loss(best_model, windows(train_tok, args.block), args.batch, dev), 4)
    export(best_model, args.out)
    best_run["val_loss_f16_fp32"] = round(mean_loss(
        GPT2LMHeadModel.from_pretrained(args.out, dtype=torch.float32).to(dev), val_xy, args.batch, dev,
        autocast=False), 4)
    log = dict(device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
               date=datetime.date.today().isoformat(), torch=torch.__version__,
               command="python3 tools/train_tiny.py " + " ".join(sys.argv[1:]),
               tokens_train=len(train_tok), tokens_val=len(val_tok), batch=args.batch, block=args.block,
               chosen=best_run, runs=runs, train_seconds=round(time.time() - start, 1))
    json.dump(log, open(os.path.join(args.out, "train_log.json"), "w"), indent=1)
    print("chosen", {k: v for k, v in best_run.items() if k != "history"}, flush=True)


def export(model, out):
    """config.json + model.safetensors exactly as save_pretrained writes them, in F16."""
    with tempfile.TemporaryDirectory() as tmp:
        config = copy.deepcopy(model.config)
        for k in ("resid_pdrop", "embd_pdrop", "attn_pdrop"):
            setattr(config, k, 0.1)  # inference ignores them; write HF's defaults
        m = GPT2LMHeadModel(config)
        m.load_state_dict({k: v.float().cpu() for k, v in model.state_dict().items()})
        m.half().save_pretrained(tmp)
        os.makedirs(out, exist_ok=True)
        for f in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(tmp, f), os.path.join(out, f))
    size = os.path.getsize(os.path.join(out, "model.safetensors"))
    print("model.safetensors: %d bytes" % size, flush=True)
    if size > MAX_BYTES:
        sys.exit("model.safetensors is %d bytes, over the %d budget" % (size, MAX_BYTES))


def finish(out, data):
    """reference.safetensors and TRAINING.md from what train() left in out."""
    enc = gpt2_encoding()
    _, val_tok = split_corpus(data, enc)
    model = make_reference.load_float64(out)
    stored = load_file(os.path.join(out, "model.safetensors"))
    make_reference.check_loaded(model, stored, dict(name="weights", layout="prefixed"))

    half = len(val_tok) // 2
    tokens = np.stack([val_tok[0:10], val_tok[half:half + 10]])
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens), use_cache=False).logits
    # the first 32 tokens of the validation split, else the next blank-line starts, until
    # every greedy step wins clearly (the fixtures' rule)
    # and the continuation holds at least N/2 distinct tokens (20 greedy tokens; fewer only
    # if no prompt manages 20)
    # (a blank line is two "\n" tokens, 198 198, when a word follows it)
    starts = [0] + [i for i in range(2, len(val_tok) - 64) if val_tok[i - 2] == val_tok[i - 1] == 198]
    found, attempt = False, 0
    for n_new in (20, 12, 8):
        for s in starts[:150]:
            attempt += 1
            prompt = val_tok[s:s + 32].tolist()
            cont, margin = make_reference.greedy(model, prompt, n_new, use_cache=True)
            found = margin >= make_reference.MARGIN and len(set(cont)) >= n_new // 2
            if found:
                break
        if found:
            break
    if not found:
        sys.exit("no prompt gives greedy margins >= %g" % make_reference.MARGIN)
    plain, _ = make_reference.greedy(model, prompt, n_new, use_cache=False)
    if plain != cont:
        sys.exit("greedy differs with and without the KV cache")
    ref = {"tokens": torch.from_numpy(tokens.astype(np.int32)), "logits": logits.to(torch.float32).contiguous(),
           "prompt": torch.tensor(prompt, dtype=torch.int32), "greedy": torch.tensor(cont, dtype=torch.int32)}
    meta = {"dtype": "F16", "layout": "prefixed", "generator": "tools/train_tiny.py (make_reference rules)",
            "reference": "transformers %s GPT2LMHeadModel, float64, eager attention" % make_reference.transformers.__version__,
            "torch": torch.__version__, "greedy_min_margin": "%.4g" % margin,
            "greedy_margin_rule": "top1-top2 >= %g*(1+max|logit|)" % make_reference.MARGIN,
            "prompt_attempts": str(attempt), "prompt_source": "validation split, token %d" % s}
    make_reference.write_safetensors(os.path.join(out, "reference.safetensors"), ref, meta)
    print("reference: prompt at val token %d, margin %.3g, greedy %r" % (s, margin, enc.decode(cont)), flush=True)

    sample_prompt = val_tok[0:32].tolist()
    sample = sample_tokens(model.float(), sample_prompt, 200, temperature=0.8, top_k=40, seed=1337)
    write_training_md(out, enc, sample_prompt, sample, prompt, cont)


@torch.no_grad()
def sample_tokens(model, prompt, n, temperature, top_k, seed):
    gen = torch.Generator().manual_seed(seed)
    ids, past, out = list(prompt), None, []
    for _ in range(n):
        feed = ids if past is None else ids[-1:]
        res = model(torch.tensor([feed]), past_key_values=past, use_cache=True)
        past = res.past_key_values
        logits = res.logits[0, -1] / temperature
        v, ix = torch.topk(logits, top_k)
        nxt = int(ix[torch.multinomial(torch.softmax(v, -1), 1, generator=gen)])
        ids.append(nxt)
        out.append(nxt)
    return out


def write_training_md(out, enc, sample_prompt, sample, prompt, greedy_ids):
    log = json.load(open(os.path.join(out, "train_log.json")))
    c = log["chosen"]
    cfg = json.load(open(os.path.join(out, "config.json")))
    lines = [
        "# The embedded default model",
        "",
        "A GPT-2-architecture model trained from scratch on Tiny Shakespeare with GPT-2's own tokenizer,",
        "by `tools/train_tiny.py`. Hugging Face layout: `config.json`, `model.safetensors` (F16, "
        "`transformer.*` keys, lm_head tied to wte), `vocab.json`, `merges.txt`.",
        "",
        "| | |",
        "| --- | --- |",
        "| command | `%s` |" % log["command"],
        "| date | %s |" % log["date"],
        "| device | %s, torch %s |" % (log["device"], log["torch"]),
        "| shape | n_layer %d, n_head %d, n_embd %d, n_positions %d, vocab %d |"
        % (cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["n_positions"], cfg["vocab_size"]),
        "| model.safetensors | %d bytes |" % os.path.getsize(os.path.join(out, "model.safetensors")),
        "| data | tinyshakespeare.txt, first 90%% of characters train (%d tokens), last 10%% validation (%d tokens) |"
        % (log["tokens_train"], log["tokens_val"]),
        "| training | AdamW (0.9, 0.95), weight decay 0.1 on matrices, warmup then cosine to 10%%, bf16 autocast, "
        "batch %d x %d tokens, grad clip 1.0 |" % (log["batch"], log["block"]),
        "| chosen | dropout %.1f, peak lr %g, %d steps scheduled, weights from step %d (lowest validation loss) |"
        % (c["dropout"], c["lr"], c["steps"], c["best_step"]),
        "| train loss | %.4f (whole train split, eval mode, bf16) |" % c["train_loss_full"],
        "| validation loss | %.4f (whole validation split in %d-token windows, bf16); %.4f with the F16 weights "
        "as stored, fp32 |" % (c["best_val"], log["block"], c["val_loss_f16_fp32"]),
        "| wall time | %.0f s of training for all candidates |" % log["train_seconds"],
        "| reference.safetensors, this file | `python3 tools/train_tiny.py %s` (torch %s, transformers %s) |"
        % (" ".join(sys.argv[1:]), torch.__version__, make_reference.transformers.__version__),
        "",
        "The validation split chose among the candidates and the stopping step, so its loss is slightly "
        "optimistic as an estimate on unseen text.",
        "",
        "## Candidates",
        "",
        "| n_layer | dropout | lr | steps | seconds | best val | at step |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in log["runs"]:
        lines.append("| %d | %.1f | %g | %d | %.0f | %.4f | %d |"
                     % (r["n_layer"], r["dropout"], r["lr"], r["steps"], r["seconds"], r["best_val"], r["best_step"]))
    lines += ["", "Loss curve of the chosen run (step, train EMA, validation):", "", "```"]
    lines += ["%5d  %s  %.4f" % (s, "%.4f" % t if t else "  -   ", v) for s, t, v in c["history"]]
    lines += ["```", "",
              "## Sample",
              "",
              "200 tokens at temperature 0.8, top-k 40, seed 1337 (PyTorch sampler, float32 weights upcast "
              "from F16), after the first 32 tokens of the validation split (in brackets):",
              "", "```", "[" + enc.decode(sample_prompt) + "]" + enc.decode(sample), "```", "",
              "## Reference (reference.safetensors)",
              "",
              "Float64 Hugging Face logits for two 10-token windows of the validation split, and the float64 "
              "greedy continuation of a 32-token validation prompt:",
              "", "```", "[" + enc.decode(prompt) + "]" + enc.decode(greedy_ids), "```", ""]
    open(os.path.join(out, "TRAINING.md"), "w").write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"))
    ap.add_argument("--out", default=os.path.join(ROOT, "weights"))
    ap.add_argument("--finish", metavar="DIR", help="only write reference.safetensors and TRAINING.md in DIR")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=N_CTX)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--budget-s", type=float, default=210, help="wall seconds for all candidates")
    ap.add_argument("--candidates", type=int, default=len(CANDIDATES), help="try only the first N")
    ap.add_argument("--steps", type=int, default=0, help="override every candidate's steps (smoke tests)")
    args = ap.parse_args()
    if args.steps:
        CANDIDATES[:] = [(n, d, args.steps, lr) for n, d, _, lr in CANDIDATES]
    if args.finish:
        finish(args.finish, args.data)
        return
    train(args)
    finish(args.out, args.data)


if __name__ == "__main__":
    main()
