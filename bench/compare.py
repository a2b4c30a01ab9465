"""bench/compare.py DIR — the side-by-side table from one bench/run.sh call: gpt2.cuh (DIR/gpt2cuh.txt, each
workload in a process of its own) against the careful-PyTorch peer (DIR/torch_peer.json) and HF transformers
(DIR/hf_peer.json); the last column is gpt2.cuh with all workloads in one process (DIR/gpt2cuh_one_process.txt),
and how much faster (+) or slower (-) that is."""
import json, os, re, sys

d = sys.argv[1]


def figures(name):
    """(size, workload) -> (figure, roofline %) from a bench_gpt2 log; {} when the log is not there"""
    r, p = {}, os.path.join(d, name)
    for line in open(p) if os.path.exists(p) else []:
        m = re.match(r"(\S+)\s+(latency|throughput|prefill)\s+([\d.]+)\s.*roofline (\d+)%", line)
        if m:
            r[(m[1], m[2])] = (float(m[3]), int(m[4]))
    return r


ours = figures("gpt2cuh.txt")  # each workload in a process of its own
one = figures("gpt2cuh_one_process.txt")  # all in one process, each model after the ones before
dev = open(os.path.join(d, "gpt2cuh.txt")).readline().strip()


def peer(name):
    p = os.path.join(d, name)
    rows = json.load(open(p)) if os.path.exists(p) else []
    r = {}
    for x in rows:
        if x.get("dtype") not in (None, "float16") or "workload" not in x:
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
