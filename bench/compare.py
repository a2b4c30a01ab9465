"""bench/compare.py DIR — the side-by-side tables from one bench/run.sh call: gpt2.cuh (DIR/gpt2cuh.txt, each
workload in a process of its own) against the careful-PyTorch peer (DIR/torch_peer.json) and HF transformers
(DIR/hf_peer.json); the last column is gpt2.cuh with all workloads in one process (DIR/gpt2cuh_one_process.txt),
and how much faster (+) or slower (-) that is. Then the scoring table, a row per size and dtype (BF16 and F32 from
DIR/gpt2cuh_score.txt), each system's tokens scored/s also as a fraction of gpt2.cuh's roofline for it (the FLOPs
of the scoring forward at the fp16 GEMM rate measured in gpt2.cuh's process), and the sizes run for gpt2.cuh alone
(DIR/gpt2cuh_extra.txt, DIR/gpt2cuh_extra_score.txt)."""
import json, os, re, sys

d = sys.argv[1]


def figures(name, dtype="f16"):
    """(size, workload) -> (figure, roofline %) from a bench_gpt2 log, the lines of runs in dtype; {} when the log is
    not there"""
    r, p, cur = {}, os.path.join(d, name), None
    for line in open(p) if os.path.exists(p) else []:
        h = re.match(r"device .*; dtype (\w+)", line)
        if h:
            cur = h[1].lower()
        m = re.match(r"(\S+)\s+(latency|throughput|prefill|score)\s+([\d.]+)\s.*roofline (\d+)%", line)
        if m and cur == dtype:
            r[(m[1], m[2])] = (float(m[3]), int(m[4]))
    return r


def score_lines(name):
    """(size, dtype) -> (tokens/s, roofline %, ceiling tokens/s, peak GB, MB above the loaded model) from the score
    lines of a bench_gpt2 log"""
    r, p, cur = {}, os.path.join(d, name), None
    for line in open(p) if os.path.exists(p) else []:
        h = re.match(r"device .*; dtype (\w+)", line)
        if h:
            cur = h[1].lower()
        m = re.match(r"(\S+)\s+score\s+([\d.]+) tokens/s .*roofline (\d+)% \((\d+) tokens/s\)\s+peak ([\d.]+) GB \(\+(\d+) MB", line)
        if m:
            r[(m[1], cur)] = (float(m[2]), int(m[3]), float(m[4]), float(m[5]), int(m[6]))
    return r


ours = figures("gpt2cuh.txt")  # each workload in a process of its own
for k, v in figures("gpt2cuh_extra.txt").items():  # the sizes run for gpt2.cuh alone (EXTRA_SIZES)
    ours.setdefault(k, v)
one = figures("gpt2cuh_one_process.txt")  # all in one process, each model after the ones before
dev = next((line.strip() for f in ("gpt2cuh.txt", "gpt2cuh_score.txt", "gpt2cuh_extra.txt") if os.path.exists(os.path.join(d, f))
            for line in open(os.path.join(d, f)) if line.startswith("device ")), "")


def peer(name):
    p = os.path.join(d, name)
    rows = json.load(open(p)) if os.path.exists(p) else []
    r = {}
    for x in rows:
        if x.get("dtype") not in (None, "float16") or x.get("workload") in (None, "score"):
            continue
        w = x["workload"]
        if w == "throughput" and x.get("batch") not in (1024, 256):
            continue
        v = x.get("decode_ms_per_tok") or x.get("gen_tok_per_s") or x.get("tok_per_s")
        if v:
            r[(x["size"], w)] = v
    return r


torch_r, hf_r = peer("torch_peer.json"), peer("hf_peer.json")
print(f"{open(os.path.join(d, 'date.txt')).read().strip()}; {dev}")
if any(w != "score" for _, w in ours):
    print("| workload | HF transformers | careful PyTorch | gpt2.cuh | gpt2.cuh vs PyTorch | gpt2.cuh roofline "
          "| gpt2.cuh, all workloads in one process |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
for size in ("124M", "355M", "774M", "1558M"):
    for w, unit in (("latency", "ms/token"), ("throughput", "tokens/s"), ("prefill", "tokens/s")):
        if (size, w) not in ours:
            continue
        v, roof = ours[(size, w)]
        t, h = torch_r.get((size, w)), hf_r.get((size, w))
        fmt = (lambda x: f"{x:.3f}") if w == "latency" else (lambda x: f"{x:,.0f}")
        ratio = "—" if t is None else (f"{t / v:.2f}× faster" if w == "latency" else f"{v / t:.2f}×")
        batch = "" if w != "throughput" else (" batch 1024" if size != "1558M" else " batch 256")
        o = one.get((size, w))
        same = "—" if o is None else f"{fmt(o[0])} ({100.0 * ((o[0] / v - 1) if w != 'latency' else (v / o[0] - 1)):+.1f}%)"
        print(f"| {w} {size}{batch}, {unit} | {fmt(h) if h else '—'} | {fmt(t) if t else '—'} | {fmt(v)} | {ratio} | {roof}% "
              f"| {same} |")

# scoring: a row per size and dtype
DT = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


def peer_scores(name):
    p = os.path.join(d, name)
    return {(x["size"], x["dtype"]): x for x in (json.load(open(p)) if os.path.exists(p) else [])
            if x.get("workload") == "score"}


sc = {**score_lines("gpt2cuh_score.txt"), **score_lines("gpt2cuh.txt")}
sc_one = score_lines("gpt2cuh_one_process.txt")
sc_extra = {**score_lines("gpt2cuh_extra_score.txt"), **score_lines("gpt2cuh_extra.txt")}
for k, v in sc_extra.items():
    sc.setdefault(k, v)
torch_s, hf_s = peer_scores("torch_peer.json"), peer_scores("hf_peer.json")
if sc:
    print()
    print("Scoring: 16 texts x 1024 tokens, every token after the first (16 x 1023 scored), tokens scored/s. Roofline: "
          "gpt2.cuh's, the scoring forward's FLOPs (2 x non-embedding weights x tokens + causal attention + the logits "
          "product 2 x C x 50257 x tokens) at the fp16 GEMM rate measured in gpt2.cuh's process, for every dtype. Peak "
          "memory: gpt2.cuh's is the device's in use (cudaMemGetInfo, CUDA context included; in brackets the part above "
          "the loaded model), the peers' torch.cuda.max_memory_allocated (in brackets the part above the weights).")
    print()
    print("| scoring | HF transformers | careful PyTorch | gpt2.cuh | gpt2.cuh vs PyTorch | gpt2.cuh vs HF "
          "| fraction of the roofline: gpt2.cuh / PyTorch / HF | peak GPU memory GB: gpt2.cuh / PyTorch / HF | target "
          "| gpt2.cuh, all workloads in one process |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for size in ("124M", "355M", "774M", "1558M"):
        for dt in ("f16", "bf16", "f32"):
            if (size, dt) not in sc:
                continue
            v, roof, ceil, peak, above = sc[(size, dt)]
            t, h = torch_s.get((size, DT[dt])), hf_s.get((size, DT[dt]))
            tv, hv = t and t["tok_per_s"], h and h["tok_per_s"]
            frac = " / ".join(f"{100 * x / ceil:.0f}%" if x else "—" for x in (v, tv, hv)) + f" (ceiling {ceil:,.0f})"
            mem = (f"{peak:.1f} (+{above / 1e3:.2f}) / " +
                   " / ".join(f"{x['peak_mem_GB']:.1f} (+{x['score_mem_GB']:.2f})" if x else "—" for x in (t, h)))
            target = "—"
            if (size, dt) == ("124M", "f16"):
                ok = tv and v >= 1.5 * tv and roof >= 60
                target = f"≥ 1.5× PyTorch and ≥ 60%: {'met' if ok else 'missed'}"
            o = sc_one.get((size, dt))
            same = "—" if o is None else f"{o[0]:,.0f} ({100.0 * (o[0] / v - 1):+.1f}%)"
            alone = " (gpt2.cuh alone)" if (size, dt) in sc_extra and not (t or h) else ""
            print(f"| {size} {dt.upper()}{alone} | {f'{hv:,.0f}' if hv else '—'} | {f'{tv:,.0f}' if tv else '—'} | {v:,.0f} "
                  f"| {f'{v / tv:.2f}×' if tv else '—'} | {f'{v / hv:.2f}×' if hv else '—'} | {frac} | {mem} | {target} "
                  f"| {same} |")
