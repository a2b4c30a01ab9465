#!/usr/bin/env python3
"""make_score_reference.py - the scoring reference of test_gpt2 (gpt2_score) for every model fixture.

    python3 tools/make_score_reference.py    (from the repository root, after tools/make_reference.py;
                                              needs torch, transformers, safetensors, numpy)

Follows Hugging Face's "Perplexity of fixed-length models" guide exactly, in float64 on the weights as
stored (GPT2LMHeadModel.from_pretrained, eager attention): max_length = L = n_positions, windows
input_ids[begin:end] with begin = 0, stride, 2 stride, ..., end = min(begin + L, n), the labels of the
tokens an earlier window scored set to -100, the loss the mean NLL over the window's targets. Each
target's log-probability is read from the same forward's logits (log_softmax at the label), and the
window's mean of them must equal the guide's loss to 1e-5 relative (the guide's loss function casts the
logits to float32 first), so the per-token values are the guide's, in float64.
The first window scores from token 1: n_context = 1.

With stride = L the guide scores no token at a window's first position (begin = L, 2L, ...): gpt2_score
scores it from the window before (its L tokens all precede it); that window's last logits row is read
for it (the guide computes that row and drops it). Those tokens are listed in the metadata.

Writes tests/score/reference.safetensors, for each fixture NAME and case k:
  NAME.k.tokens        I32 [n]    random token ids
  NAME.k.params        I32 [2]    stride, n_context (1)
  NAME.k.logprobs      F32 [n-1]  log p(token t | its window), t = 1..n-1
  NAME.k.ranks         I32 [n-1]  tokens with a higher logit than token t
  NAME.k.rank_margin   F32 [n-1]  min over v != token t of |logit v - logit t| / (1 + max |logit|): a rank is
                                  certain for a backend whose logit tolerance is below half of it
  NAME.k.sum           F32 [1]    sum of the float64 log-probabilities
  __metadata__         per case: the guide's own perplexity and token count, versions
"""
import json
import math
import os
import sys

import numpy as np
import torch
import transformers
from transformers import GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_reference import FIXTURES, MODELS, ROOT, load_float64, write_safetensors  # noqa: E402

OUT = os.path.join(ROOT, "tests", "score", "reference.safetensors")


def cases(fx):
    """(n_tokens, stride) per case: texts longer than L at strides L/2, L, an odd one and 1 (shorter, so the
    L-token windows stay few), and one text shorter than L."""
    L = fx["n_positions"]
    long_n = L + L // 2 + 3 if L > 256 else 2 * L + L // 2 + 3
    odd = max(3, (L // 3) | 1)
    return [(long_n, L // 2), (long_n, L), (long_n, odd), (L + 6, 1), (max(2, L // 2 + 1), L // 2)]


def score_guide(model, ids, L, stride):
    """The guide's loop over one text; per-token log-probabilities, ranks, margins (index t - 1 for token t)."""
    n = len(ids)
    lp = np.full(n, np.nan)
    rank = np.full(n, -1, dtype=np.int64)
    margin = np.full(n, np.nan)
    x = torch.tensor([ids])
    nll_sum, n_guide, prev_end, extra = 0.0, 0, 0, []
    prev_last = None  # the previous window's last logits row (stride = L: it predicts this window's first token)

    def put(t, row):
        lsm = torch.log_softmax(row, -1)
        lp[t] = float(lsm[ids[t]])
        rank[t] = int((row > row[ids[t]]).sum())
        others = torch.cat([row[:ids[t]], row[ids[t] + 1:]])
        margin[t] = float((others - row[ids[t]]).abs().min() / (1 + row.abs().max()))

    for begin in range(0, n, stride):
        end = min(begin + L, n)
        trg_len = end - prev_end
        input_ids = x[:, begin:end]
        target_ids = input_ids.clone()
        target_ids[:, :-trg_len] = -100
        with torch.no_grad():
            out = model(input_ids, labels=target_ids)
        logits = out.logits[0]
        got = []
        for p in range(1, end - begin):  # the label shift: row p - 1 predicts position p
            if target_ids[0, p] != -100:
                put(begin + p, logits[p - 1])
                got.append(-lp[begin + p])
        if not math.isclose(float(np.mean(got)), float(out.loss), rel_tol=0, abs_tol=1e-5 * (1 + float(out.loss))):
            sys.exit("window %d..%d: per-token mean %.15g, the guide's loss %.15g" % (begin, end, np.mean(got), out.loss))
        if target_ids[0, 0] != -100 and begin > 0:  # stride = L: the guide drops this token
            put(begin, prev_last)
            extra.append(begin)
        num_loss_tokens = int((target_ids != -100).sum()) - target_ids.size(0)  # the guide's count
        nll_sum += float(out.loss) * num_loss_tokens
        n_guide += num_loss_tokens
        prev_end = end
        prev_last = logits[-1]
        if end == n:
            break
    assert not np.isnan(lp[1:]).any() and (rank[1:] >= 0).all()
    return lp[1:], rank[1:], margin[1:], math.exp(nll_sum / n_guide), n_guide, extra


def main():
    tensors, meta = {}, {"generator": "tools/make_score_reference.py",
                         "reference": "transformers %s GPT2LMHeadModel, float64, eager attention, "
                                      "the 'Perplexity of fixed-length models' loop" % transformers.__version__,
                         "torch": torch.__version__}
    for fx in FIXTURES:
        d = os.path.join(MODELS, fx["name"])
        model = load_float64(d)
        L = model.config.n_positions
        rng = np.random.default_rng(fx["seed"] + 7)
        for k, (n, stride) in enumerate(cases(fx)):
            ids = rng.integers(0, fx["vocab"], n).tolist()
            lp, rank, margin, ppl, n_guide, extra = score_guide(model, ids, L, stride)
            key = "%s.%d." % (fx["name"], k)
            tensors[key + "tokens"] = torch.tensor(ids, dtype=torch.int32)
            tensors[key + "params"] = torch.tensor([stride, 1], dtype=torch.int32)
            tensors[key + "logprobs"] = torch.from_numpy(lp).to(torch.float32)
            tensors[key + "ranks"] = torch.from_numpy(rank).to(torch.int32)
            tensors[key + "rank_margin"] = torch.from_numpy(margin).to(torch.float32)
            tensors[key + "sum"] = torch.tensor([float(lp.sum())], dtype=torch.float32)
            meta[key + "guide"] = json.dumps({"ppl": ppl, "tokens": n_guide, "ppl_all": math.exp(-lp.mean()),
                                              "from_window_before": extra})
            print("%-22s case %d: n %5d L %4d stride %4d  ppl %.6g (guide %.6g over %d tokens)%s"
                  % (fx["name"], k, n, L, stride, math.exp(-lp.mean()), ppl, n_guide,
                     "  %d tokens from the window before" % len(extra) if extra else ""))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, tensors, meta)
    print("%s: %d bytes" % (os.path.relpath(OUT, ROOT), os.path.getsize(OUT)))


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
