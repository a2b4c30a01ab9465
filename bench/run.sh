#!/bin/bash
# bench/run.sh — gpt2.cuh and the careful-PyTorch peer (bench/torch_peer.py) on DESIGN.md's standard workloads,
# in one device call, printed side by side with the ratios. Usage: SIZES="124M 355M" PEER_SIZES=124M bash bench/run.sh
# Logs and the raw figures go to $OUT (or ./bench_logs).
OUT=${OUT:-bench_logs}; mkdir -p "$OUT"
SIZES=${SIZES:-"124M 355M 774M 1558M"}; PEER_SIZES=${PEER_SIZES:-"124M 1558M"}
make bench > "$OUT/build_bench.log" 2>&1 || { tail -20 "$OUT/build_bench.log"; exit 1; }
timeout 330 bench/bench_gpt2 $SIZES 2>&1 | tee "$OUT/gpt2cuh.txt"
PYTHONUNBUFFERED=1 timeout 150 python3 bench/torch_peer.py $PEER_SIZES 2>&1 | tee "$OUT/torch_peer.txt"
python3 - "$OUT/gpt2cuh.txt" "$OUT/torch_peer.txt" <<'PY'
import json, re, sys
ours, peer = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+)\s+(latency|throughput|prefill)\s+([\d.]+)", line)
    if m: ours[(m.group(1), m.group(2))] = float(m.group(3))
for line in open(sys.argv[2]):
    if not line.startswith("{"): continue
    r = json.loads(line)
    k = (r["size"], r["workload"])
    if r["workload"] == "latency": peer[k] = r["decode_ms_per_tok"]
    elif r["workload"] == "prefill": peer[k] = r["tok_per_s"]
    elif r["batch"] == (1024 if r["size"] == "124M" else 256): peer[k] = r["gen_tok_per_s"]
print("\n%-6s %-11s %14s %14s %8s" % ("size", "workload", "gpt2.cuh", "torch-graph", "ratio"))
for (s, w), v in sorted(ours.items()):
    p = peer.get((s, w))
    unit = "ms/token" if w == "latency" else "tokens/s"
    ratio = (p / v if w == "latency" else v / p) if p else float("nan")
    print("%-6s %-11s %14s %14s %7.2fx  (%s; >1: gpt2.cuh faster)" % (s, w, "%.4g" % v, "%.4g" % p if p else "-", ratio, unit))
PY
