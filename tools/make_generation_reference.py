#!/usr/bin/env python3
"""make_generation_reference.py - the controlled-generation reference of test_gpt2 (penalties, bans,
logit bias, min_new_tokens, logprobs, sampling warpers), in float64 Hugging Face.

    python3 tools/make_generation_reference.py   (from the repository root, after tools/make_reference.py;
                                                  needs torch, transformers 5.x, numpy)

Writes tests/generate/reference.json, deterministically (fixed seeds; two runs give the same bytes), and the same
data flat in tests/generate/cases.txt, which test_gpt2 reads (see write_cases; --text rewrites cases.txt from
reference.json alone).
Every model is a fixture of tests/models loaded back as stored, upcast to float64 (eager attention).

"greedy": do_sample=False, prompts of PROMPT_LEN random ids, MAX_NEW new tokens, on the fixtures in
GREEDY_FIXTURES. Each case is run twice: by Hugging Face's generate (its own processors, plus the
custom ones below) and by a plain loop here that applies the processors in the engine's order
    bias, repetition_penalty, presence/frequency, no_repeat_ngram, min_new_tokens
to the float64 raw logits and takes the argmax; the two must give the same tokens and the same processed
logits (to 1e-5: generate casts each step's logits to float32 before its processors, so the recorded
values and margins are this loop's, in float64).
(generate builds sequence_bias first, then repetition_penalty, no_repeat_ngram, bad_words, min_new_tokens,
and appends custom processors such as presence/frequency after all of those. The -inf processors commute
with everything and additive ones commute with each other, so that is the same function.)
Every step must win by top1 - top2 >= MARGIN x (1 + max finite |logit|) after the processors, so a float32
engine repeats the tokens exactly; prompts are redrawn from a fixed seed sequence until that holds and
until the case's processor changes the output (the tokens differ from plain greedy on the same prompt).
Cases, per fixture:
  repetition_penalty     1.3: Hugging Face / CTRL over prompt + output: the logit of every token present
                         is divided by 1.3 when > 0, multiplied by 1.3 when < 0 (once per token id)
  no_repeat_ngram_2/_3   no_repeat_ngram_size 2 and 3: a token that would complete an n-gram already
                         present anywhere in prompt + output is banned (-inf)
  eos_early              eos_token_id = a token plain greedy emits at step 2..5: generation stops there
                         (the eos is emitted and counted); the baseline of min_new_tokens
  min_new_tokens         the same prompt and eos with min_new_tokens 8: the eos is banned (-inf) while
                         fewer than 8 tokens were generated (steps 0..7), so the first 8 tokens are never it
  ban                    three ids at -inf (plain greedy's first token, the runner-up at step 0 and a token
                         plain greedy emits later); a bias list with -inf values
  logit_bias             +0.75 on the token ranked third at step 0, -0.75 on plain greedy's second token
  presence_frequency     presence 0.5, frequency 0.3, OpenAI's formula over GENERATED tokens only:
                         logit[t] -= 0.5 * (count[t] > 0) + 0.3 * count[t]  (PresenceFrequencyPenalty)
  all                    all at once: bias (+0.75, -0.75 and one -inf ban), repetition_penalty 1.3,
                         presence 0.5 + frequency 0.3, no_repeat_ngram 3, min_new_tokens 8 with an eos that
                         the same settings without min_new_tokens emit at step 1..6
  Each case lists: fixture, prompt, params (engine names), hf_generate_kwargs (what generate got),
  tokens (the expected output, eos included when emitted), stopped_by_eos, plain_greedy (no processors,
  same prompt and eos: how the processor changed it), min_margin and min_margin_step (relative margin,
  after the processors), and for min_new_tokens / all "without_min_new_tokens" (the tokens then).
  params.bias_ids / params.bias are the engine's bias list; a ban's value is the string "-inf".
"logprobs": for the repetition_penalty case of each greedy fixture: each generated token's log-softmax of
  the RAW logits (temperature 1, before any processor) and the TOP_LOGPROBS most likely ids with their
  log-probabilities (most likely first), plus the smallest gap between neighbours among the first
  TOP_LOGPROBS + 1, relative to 1 + max|logit|, per step (top_gap) and overall (min_top_gap). Where a gap
  is below a backend's logit tolerance two alternatives may swap (or the 5th and 6th trade places): the
  values rank by rank still hold (a sorted list moves continuously with the logits), the ids only where
  the gaps around them exceed the tolerance.
"warpers": last-position logits (float64, listed) of WARPER_PROMPTS prompts on WARPER_FIXTURE (the rows
  with the lowest perplexity among WARPER_CANDIDATES draws whose sets hold under perturbation), and for
  each warper setting, applied as generate(do_sample=True) builds them (Hugging Face's order: temperature,
  top_k, top_p, min_p, typical_p; see hf_warper_order), the ids kept (finite after the warpers, ascending)
  and the renormalised probabilities over them (same order). Checked against generate's own processed
  scores for one new token. stable_delta: the largest d in PERTURB for which the kept set is unchanged when
  the logits move by up to d x (1 + max|logit|) (each token alone up and down, kept vs dropped tokens
  apart, random moves): a backend whose logit tolerance is at most d must keep exactly that set.
  Settings (WARPERS): temperature 0.8; top_k 20; top_p 0.9; min_p 0.05; typical_p 0.9 (each alone, the
  others off); combined = temperature 0.8, top_p 0.9, min_p 0.05, typical_p 0.9; combined_top_k = the same
  with top_k 20. generate is always given top_k=0 unless a setting names it: with do_sample=True and no
  top_k, generate applies top_k 50 by default (the engine's top_k 0 means no limit).
  Notes on Hugging Face's semantics the engine must follow:
  - min_p's threshold is min_p x the largest probability AFTER temperature (and after top_k/top_p, whose
    renormalisation leaves the ratio unchanged); tokens with p < threshold go.
  - typical_p computes its entropy and cumulative mass on the distribution left by temperature, top_k,
    top_p and min_p (renormalised), not on the raw one; it keeps tokens in order of |-log p - H| up to
    and including the first whose cumulative mass reaches typical_p (ties with it too).
  - top_p drops tokens whose ascending cumulative probability is <= 1 - top_p (the most likely is kept).
"""
import json
import os
import sys
import warnings

import numpy as np
import torch
import transformers
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList
from transformers.generation.logits_process import (MinNewTokensLengthLogitsProcessor,
                                                    NoRepeatNGramLogitsProcessor,
                                                    RepetitionPenaltyLogitsProcessor)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_reference import FIXTURES, MODELS, ROOT, load_float64  # noqa: E402

OUT = os.path.join(ROOT, "tests", "generate", "reference.json")
OUT_TEXT = os.path.join(ROOT, "tests", "generate", "cases.txt")
GREEDY_FIXTURES = ["f32_bare_buffers", "f16_prefixed_lmhead"]
PROMPT_LEN = 10
MAX_NEW = 24
MARGIN = 1e-2          # top1 - top2 >= MARGIN * (1 + max finite |logit|) after the processors, every step
MAX_ATTEMPTS = 3000
F32_TOL = 1e-5         # generate casts each step's logits to float32 before its processors
REPETITION = 1.3
PRESENCE, FREQUENCY = 0.5, 0.3
MIN_NEW = 8
BIAS = 0.75            # exact in float32
TOP_LOGPROBS = 5
WARPER_FIXTURE = "f32_bare_ctx32"
WARPER_PROMPTS = 3
WARPER_CANDIDATES = 32
PERTURB = [1e-4, 1e-3, 1e-2, 5e-2]
WARPERS = [
    ("temperature", dict(temperature=0.8)),
    ("top_k", dict(top_k=20)),
    ("top_p", dict(top_p=0.9)),
    ("min_p", dict(min_p=0.05)),
    ("typical_p", dict(typical_p=0.9)),
    ("combined", dict(temperature=0.8, top_p=0.9, min_p=0.05, typical_p=0.9)),
    ("combined_top_k", dict(temperature=0.8, top_k=20, top_p=0.9, min_p=0.05, typical_p=0.9)),
]


# ------------------------------------------------------------------ the custom processors (the spec)

class LogitBias(LogitsProcessor):
    """logit[id] += value for each (id, value); a value of -inf bans the id. Hugging Face's
    sequence_bias with single-token sequences does the same (generate runs that one; this loop runs this)."""

    def __init__(self, bias):
        self.bias = dict(bias)

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        for t, v in self.bias.items():
            scores[:, t] += v
        return scores


class PresenceFrequencyPenalty(LogitsProcessor):
    """OpenAI's presence and frequency penalties over the GENERATED tokens only (the prompt is not counted):
    count[t] = times t was generated so far; logit[t] -= presence * (count[t] > 0) + frequency * count[t]."""

    def __init__(self, presence, frequency, prompt_len):
        self.presence, self.frequency, self.prompt_len = presence, frequency, prompt_len

    def __call__(self, input_ids, scores):
        out = input_ids[:, self.prompt_len:]
        count = torch.zeros_like(scores)
        count.scatter_add_(1, out, torch.ones_like(out, dtype=scores.dtype))
        return scores - self.presence * (count > 0).to(scores.dtype) - self.frequency * count


# ------------------------------------------------------------------ greedy cases

def processors(p, prompt_len):
    """The engine's order: bias, repetition_penalty, presence/frequency, no_repeat_ngram, min_new_tokens."""
    lst = LogitsProcessorList()
    if p.get("bias"):
        if len({t for t, _ in p["bias"]}) != len(p["bias"]):
            sys.exit("a bias list names an id twice: %s" % p["bias"])
        lst.append(LogitBias(p["bias"]))
    if p.get("repetition_penalty"):
        lst.append(RepetitionPenaltyLogitsProcessor(p["repetition_penalty"]))
    if p.get("presence_penalty") or p.get("frequency_penalty"):
        lst.append(PresenceFrequencyPenalty(p.get("presence_penalty", 0.0), p.get("frequency_penalty", 0.0),
                                            prompt_len))
    if p.get("no_repeat_ngram"):
        lst.append(NoRepeatNGramLogitsProcessor(p["no_repeat_ngram"]))
    if p.get("min_new_tokens") and p.get("eos") is not None:
        lst.append(MinNewTokensLengthLogitsProcessor(prompt_len, p["min_new_tokens"], p["eos"]))
    return lst


def rel_margin(row):
    """(top1 - top2) / (1 + max finite |logit|) of one processed logits row."""
    finite = row[torch.isfinite(row)]
    top = torch.topk(row, 2).values
    return float((top[0] - top[1]) / (1 + finite.abs().max()))


def loop_greedy(model, prompt, p):
    """Greedy with the KV cache, the processors applied in the engine's order.
    Returns (tokens, processed rows, raw rows, smallest margin, its step)."""
    lst = processors(p, len(prompt))
    ids = torch.tensor([prompt])
    past, toks, proc_rows, raw_rows = None, [], [], []
    margin, where = float("inf"), -1
    with torch.no_grad():
        for step in range(MAX_NEW):
            feed = ids if past is None else ids[:, -1:]
            out = model(feed, past_key_values=past, use_cache=True)
            past = out.past_key_values
            raw = out.logits[:, -1, :]
            row = lst(ids, raw.clone())
            m = rel_margin(row[0])
            if m < margin:
                margin, where = m, step
            t = int(torch.argmax(row[0]))
            toks.append(t)
            proc_rows.append(row[0])
            raw_rows.append(raw[0])
            ids = torch.cat([ids, torch.tensor([[t]])], 1)
            if p.get("eos") is not None and t == p["eos"]:
                break
    return toks, proc_rows, raw_rows, margin, where


def hf_kwargs(p):
    """generate's arguments for the same settings (presence/frequency goes in as a custom processor)."""
    kw = {}
    if p.get("bias"):
        kw["sequence_bias"] = [[[t], v] for t, v in p["bias"]]
    if p.get("repetition_penalty"):
        kw["repetition_penalty"] = p["repetition_penalty"]
    if p.get("no_repeat_ngram"):
        kw["no_repeat_ngram_size"] = p["no_repeat_ngram"]
    if p.get("eos") is not None:
        kw["eos_token_id"] = p["eos"]
        kw["pad_token_id"] = p["eos"]
    if p.get("min_new_tokens"):
        kw["min_new_tokens"] = p["min_new_tokens"]
    return kw


def hf_greedy(model, prompt, p):
    """Hugging Face's generate, greedy: (tokens, processed score rows, raw logit rows)."""
    custom = LogitsProcessorList()
    if p.get("presence_penalty") or p.get("frequency_penalty"):
        custom.append(PresenceFrequencyPenalty(p.get("presence_penalty", 0.0), p.get("frequency_penalty", 0.0),
                                               len(prompt)))
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=MAX_NEW,
                             logits_processor=custom, output_scores=True, output_logits=True,
                             return_dict_in_generate=True, **hf_kwargs(p))
    return out.sequences[0, len(prompt):].tolist(), [s[0] for s in out.scores], [s[0] for s in out.logits]


def run_case(model, name, prompt, p):
    """The loop and generate, which must agree; the case's record."""
    toks, proc, raw, margin, where = loop_greedy(model, prompt, p)
    htoks, hproc, hraw = hf_greedy(model, prompt, p)
    if htoks != toks:
        sys.exit("%s: generate gives %s, the loop %s" % (name, htoks, toks))
    for a, b in zip(proc, hproc):  # generate processes in float32
        fa, fb = torch.isfinite(a), torch.isfinite(b)
        if not torch.equal(fa, fb) or not torch.allclose(a[fa], b[fb].double(), rtol=0, atol=F32_TOL):
            sys.exit("%s: generate's processed scores differ from the loop's" % name)
    for a, b in zip(raw, hraw):
        if not torch.allclose(a, b.double(), rtol=0, atol=F32_TOL):
            sys.exit("%s: generate's raw logits differ from the loop's" % name)
    return toks, raw, margin, where


def params_json(p):
    """The engine's field names; the bias as two lists, ids and values (a ban's value is the string "-inf")."""
    out = {}
    for k in ["repetition_penalty", "presence_penalty", "frequency_penalty", "no_repeat_ngram", "min_new_tokens"]:
        if p.get(k):
            out[k] = p[k]
    if p.get("bias"):
        out["bias_ids"] = [t for t, _ in p["bias"]]
        out["bias"] = ["-inf" if v == float("-inf") else v for _, v in p["bias"]]
    out["stop_token"] = p["eos"] if p.get("eos") is not None else -1
    out["max_new_tokens"] = MAX_NEW
    return out


def case_params(kind, plain, plain_raw, model, prompt):
    """The settings of case kind for this prompt (some ids are chosen from plain greedy's run), or None
    when the prompt cannot make the case matter."""
    if kind == "repetition_penalty":
        return dict(repetition_penalty=REPETITION)
    if kind == "no_repeat_ngram_2":
        return dict(no_repeat_ngram=2)
    if kind == "no_repeat_ngram_3":
        return dict(no_repeat_ngram=3)
    if kind in ("eos_early", "min_new_tokens"):
        for s in range(2, 6):
            if plain[s] not in plain[:s]:
                return dict(eos=plain[s], min_new_tokens=MIN_NEW if kind == "min_new_tokens" else 0)
        return None
    if kind == "ban":
        order = torch.argsort(plain_raw[0], descending=True).tolist()
        later = [t for t in plain[2:] if t not in (order[0], order[1])]
        if not later:
            return None
        return dict(bias=[(order[0], float("-inf")), (order[1], float("-inf")), (later[0], float("-inf"))])
    if kind == "logit_bias":
        third = int(torch.argsort(plain_raw[0], descending=True)[2])
        if plain[1] == third:
            return None
        return dict(bias=[(third, BIAS), (plain[1], -BIAS)])
    if kind == "presence_frequency":
        return dict(presence_penalty=PRESENCE, frequency_penalty=FREQUENCY)
    if kind == "all":
        third = int(torch.argsort(plain_raw[0], descending=True)[2])
        p = dict(repetition_penalty=REPETITION, presence_penalty=PRESENCE, frequency_penalty=FREQUENCY,
                 no_repeat_ngram=3)
        if plain[1] == third:
            return None
        p["bias"] = [(third, BIAS), (plain[1], -BIAS)]
        first = loop_greedy(model, prompt, p)[0]
        if first[0] in (third, plain[1]):
            return None
        p["bias"].append((first[0], float("-inf")))  # a ban on what these settings pick first
        banned = loop_greedy(model, prompt, p)[0]
        for s in range(1, 7):
            if banned[s] not in banned[:s]:
                p.update(eos=banned[s], min_new_tokens=MIN_NEW)
                return p
        return None
    raise ValueError(kind)


CASES = ["repetition_penalty", "no_repeat_ngram_2", "no_repeat_ngram_3", "eos_early", "min_new_tokens", "ban",
         "logit_bias", "presence_frequency", "all"]


def greedy_cases(fx, model):
    cases, logprobs = [], []
    for ci, kind in enumerate(CASES):
        rng = np.random.default_rng([fx["seed"], 59, ci])
        for attempt in range(MAX_ATTEMPTS):
            prompt = rng.integers(0, fx["vocab"], PROMPT_LEN).tolist()
            plain, _, plain_raw, _, _ = loop_greedy(model, prompt, {})
            p = case_params(kind, plain, plain_raw, model, prompt)
            if p is None:
                continue
            toks, _, raw, margin, where = loop_greedy(model, prompt, p)
            if margin < MARGIN:
                continue
            base = loop_greedy(model, prompt, {"eos": p.get("eos")})[0]
            if kind == "eos_early":
                if base != toks or len(toks) >= MIN_NEW:
                    continue
            elif toks == base:
                continue
            extra = {}
            if p.get("min_new_tokens"):
                q = dict(p, min_new_tokens=0)
                without, _, _, m2, _ = loop_greedy(model, prompt, q)
                if len(without) >= MIN_NEW or m2 < MARGIN:
                    continue
                if any(t == p["eos"] for t in toks[:MIN_NEW]):
                    sys.exit("%s: the eos was emitted before min_new_tokens" % kind)
                extra["without_min_new_tokens"] = without
                extra["without_min_new_tokens_min_margin"] = float("%.4g" % m2)
            break
        else:
            sys.exit("%s/%s: no prompt in %d attempts; change the seeds" % (fx["name"], kind, MAX_ATTEMPTS))
        toks, raw, margin, where = run_case(model, "%s/%s" % (fx["name"], kind), prompt, p)
        first_diff = next((i for i, (a, b) in enumerate(zip(toks, base)) if a != b), min(len(toks), len(base)))
        kw = hf_kwargs(p)
        if "sequence_bias" in kw:
            kw["sequence_bias"] = [[ids, "-inf" if v == float("-inf") else v] for ids, v in kw["sequence_bias"]]
        if p.get("presence_penalty"):
            kw["logits_processor"] = "[PresenceFrequencyPenalty(%g, %g, prompt_len)]" % (PRESENCE, FREQUENCY)
        case = dict(name=kind, fixture=fx["name"], prompt=prompt, params=params_json(p), hf_generate_kwargs=kw,
                    tokens=toks, stopped_by_eos=p.get("eos") is not None and toks[-1] == p["eos"],
                    plain_greedy=base, first_difference_step=first_diff, min_margin=float("%.4g" % margin),
                    min_margin_step=where, prompt_attempts=attempt + 1, **extra)
        cases.append(case)
        print("%-20s %-18s tries %4d  margin %.4f  %d tokens%s" % (fx["name"], kind, attempt + 1, margin, len(toks),
              " (eos)" if case["stopped_by_eos"] else ""))
        if kind == "repetition_penalty":
            logprobs.append(logprob_record(fx, case, raw))
    return cases, logprobs


def logprob_record(fx, case, raw_rows):
    lp, top_ids, top_lp, gaps = [], [], [], []
    for t, row in zip(case["tokens"], raw_rows):
        ls = torch.log_softmax(row, -1)
        v, i = torch.topk(ls, TOP_LOGPROBS + 1)
        gaps.append(float("%.4g" % float((v[:-1] - v[1:]).min() / (1 + row.abs().max()))))
        lp.append(round(float(ls[t]), 10))
        top_ids.append(i[:TOP_LOGPROBS].tolist())
        top_lp.append([round(float(x), 10) for x in v[:TOP_LOGPROBS]])
    return dict(fixture=fx["name"], case="repetition_penalty", prompt=case["prompt"], params=case["params"],
                tokens=case["tokens"], logprobs=lp, top_logprobs=TOP_LOGPROBS, top_ids=top_ids,
                top_values=top_lp, top_gap=gaps, min_top_gap=min(gaps))


# ------------------------------------------------------------------ warpers

def warper_list(model, kw):
    """The warpers generate(do_sample=True) builds for these settings, in its order."""
    gc = GenerationConfig(**dict(dict(do_sample=True, top_k=0), **kw))
    gc._eos_token_tensor = None
    return model._get_logits_processor(generation_config=gc, input_ids_seq_length=PROMPT_LEN,
                                       logits_processor=LogitsProcessorList(), device="cpu", model_kwargs={})


def kept(lst, ids, row):
    return torch.isfinite(lst(ids, row[None].clone())[0])


def stable_delta(lst, ids, row, g):
    """The largest d in PERTURB at which the kept set survives moves of the logits by d x (1 + max|logit|)."""
    want = kept(lst, ids, row)
    V, scale, best = row.shape[0], 1 + float(row.abs().max()), 0.0
    for d in PERTURB:
        e = d * scale
        moves = [torch.where(want, e, -e), torch.where(want, -e, e)]
        for j in range(V):
            for s in (e, -e):
                m = torch.zeros(V, dtype=row.dtype)
                m[j] = s
                moves.append(m)
        moves += [torch.from_numpy(g.uniform(-e, e, V)) for _ in range(32)]
        if any(not torch.equal(kept(lst, ids, row + m), want) for m in moves):
            break
        best = d
    return best


def warpers(model, fx):
    rng = np.random.default_rng([fx["seed"], 59, 100])
    order = [type(w).__name__ for w in warper_list(model, WARPERS[-1][1])]
    cands = []
    for _ in range(WARPER_CANDIDATES):
        prompt = rng.integers(0, fx["vocab"], PROMPT_LEN).tolist()
        with torch.no_grad():
            row = model(torch.tensor([prompt])).logits[0, -1]
        p = torch.softmax(row / 0.8, -1)
        ppl = float(torch.exp(-(p * p.log()).sum()))
        g = np.random.default_rng([fx["seed"], 59, 101])
        deltas = [stable_delta(warper_list(model, kw), torch.tensor([prompt]), row, g) for _, kw in WARPERS]
        cands.append((min(deltas) >= 1e-3, -ppl, prompt, row, deltas))
    cands.sort(key=lambda c: (not c[0], -c[1]))
    rows = []
    for ok, negppl, prompt, row, deltas in cands[:WARPER_PROMPTS]:
        ids = torch.tensor([prompt])
        rec = dict(prompt=prompt, perplexity_at_t08=round(-negppl, 4),
                   logits=[float("%.10g" % x) for x in row.tolist()], settings=[])
        for (name, kw), d in zip(WARPERS, deltas):
            lst = warper_list(model, kw)
            out = lst(ids, row[None].clone())[0]
            keep = torch.isfinite(out)
            # generate's own processed scores for one sampled token must keep the same set
            with torch.no_grad():
                gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=1, do_sample=True,
                                     top_k=kw.get("top_k", 0), output_scores=True, return_dict_in_generate=True,
                                     pad_token_id=0, eos_token_id=None,
                                     **{k: v for k, v in kw.items() if k != "top_k"})
            if not torch.equal(torch.isfinite(gen.scores[0][0]), keep):
                sys.exit("warpers %s: generate keeps another set" % name)
            if not torch.allclose(gen.scores[0][0][keep].double(), out[keep], rtol=0, atol=F32_TOL):
                sys.exit("warpers %s: generate's warped scores differ" % name)
            probs = torch.softmax(out, -1)
            kept_ids = torch.nonzero(keep)[:, 0].tolist()
            rec["settings"].append(dict(name=name, params=kw, hf_warpers=[type(w).__name__ for w in lst],
                                        kept_ids=kept_ids, probs=[float("%.10g" % float(probs[i])) for i in kept_ids],
                                        n_kept=len(kept_ids), stable_delta=d))
        rows.append(rec)
        print("warpers %s prompt %s: kept %s, stable to %s" % (fx["name"], prompt,
              [s["n_kept"] for s in rec["settings"]], [s["stable_delta"] for s in rec["settings"]]))
    return order, rows


def main():
    torch.manual_seed(0)
    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", message=".*past_key_values.*deprecated")
    fixtures = {fx["name"]: fx for fx in FIXTURES}
    greedy, logprobs = [], []
    for name in GREEDY_FIXTURES:
        model = load_float64(os.path.join(MODELS, name))
        model.generation_config = GenerationConfig()  # no eos unless a case sets one
        c, l = greedy_cases(fixtures[name], model)
        greedy += c
        logprobs += l
    model = load_float64(os.path.join(MODELS, WARPER_FIXTURE))
    model.generation_config = GenerationConfig()
    order, rows = warpers(model, fixtures[WARPER_FIXTURE])
    ref = {
        "generator": "tools/make_generation_reference.py",
        "reference": "transformers %s GPT2LMHeadModel, float64, eager attention; torch %s"
                     % (transformers.__version__, torch.__version__),
        "greedy_margin_rule": "top1 - top2 >= %g * (1 + max finite |logit|) after the processors, every step" % MARGIN,
        "processor_order": ["bias", "repetition_penalty", "presence_penalty/frequency_penalty", "no_repeat_ngram",
                            "min_new_tokens"],
        "hf_warper_order": order,
        "greedy": greedy,
        "logprobs": logprobs,
        "warpers": dict(fixture=WARPER_FIXTURE, perturbations=PERTURB, rows=rows),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(to_json(ref) + "\n")
    write_cases(ref)
    print("%s: %d greedy cases (smallest margin %.4g), %d logprob runs, %d warper rows, %d bytes"
          % (os.path.relpath(OUT, ROOT), len(greedy), min(c["min_margin"] for c in greedy), len(logprobs),
             len(rows), os.path.getsize(OUT)))


def to_json(obj, indent=0):
    """JSON with lists of numbers on one line (readable and small)."""
    pad = " " * indent
    if isinstance(obj, dict):
        items = ['%s  %s: %s' % (pad, json.dumps(k), to_json(v, indent + 2)) for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(x, (dict, list)) for x in obj):
        if all(isinstance(x, list) and not any(isinstance(y, (dict, list)) for y in x) for x in obj):
            return "[\n" + ",\n".join(pad + "  " + json.dumps(x) for x in obj) + "\n" + pad + "]"
        if not any(isinstance(x, dict) for x in obj):
            return json.dumps(obj)
        return "[\n" + ",\n".join(pad + "  " + to_json(x, indent + 2) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj)


def write_cases(ref):
    """tests/generate/cases.txt: reference.json's cases as records a C test reads with scanf alone.
    A record is a header line "KIND NAME FIXTURE", lines "KEY N V1 .. VN" (a list of N numbers; a scalar is a list
    of 1; a ban's bias is -inf), and a line "end". Kinds: greedy (the greedy cases: prompt, tokens, the params by
    the engine's names, bias_ids/bias, without_min_new_tokens), logprobs (NAME is the case: prompt, params, tokens,
    logprobs, top_ids/top_values [steps x top_logprobs] row by row, top_gap), warper (NAME is the setting: row,
    logits, its params, kept_ids, probs, stable_delta)."""
    def num(x):
        return "-inf" if x in ("-inf", float("-inf")) else json.dumps(x)

    def line(key, vals):
        return "%s %d %s" % (key, len(vals), " ".join(num(v) for v in vals))

    def params(p):
        return [line(k, v if isinstance(v, list) else [v]) for k, v in p.items()]

    out = ["# Controlled-generation cases for test_gpt2, written by tools/make_generation_reference.py from",
           "# reference.json (%s): do not edit." % ref["reference"],
           "# record: KIND NAME FIXTURE, then lines KEY N V1 .. VN, then end"]
    for c in ref["greedy"]:
        out.append("greedy %s %s" % (c["name"], c["fixture"]))
        out += [line("prompt", c["prompt"])] + params(c["params"]) + [line("tokens", c["tokens"])]
        out.append(line("stopped_by_eos", [int(c["stopped_by_eos"])]))
        if "without_min_new_tokens" in c:
            out.append(line("without_min_new_tokens", c["without_min_new_tokens"]))
        out.append("end")
    for c in ref["logprobs"]:
        out.append("logprobs %s %s" % (c["case"], c["fixture"]))
        out += [line("prompt", c["prompt"])] + params(c["params"]) + [line("tokens", c["tokens"])]
        out += [line("logprobs", c["logprobs"]), line("top_logprobs", [c["top_logprobs"]]),
                line("top_ids", sum(c["top_ids"], [])), line("top_values", sum(c["top_values"], [])),
                line("top_gap", c["top_gap"]), "end"]
    w = ref["warpers"]
    for i, row in enumerate(w["rows"]):
        for st in row["settings"]:
            out.append("warper %s %s" % (st["name"], w["fixture"]))
            out += [line("row", [i]), line("logits", row["logits"])] + params(st["params"])
            out += [line("kept_ids", st["kept_ids"]), line("probs", st["probs"]),
                    line("stable_delta", [st["stable_delta"]]), "end"]
    with open(OUT_TEXT, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--text"]:
        with open(OUT) as f:
            write_cases(json.load(f))
    else:
        main()
