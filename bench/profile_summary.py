#!/usr/bin/env python3
"""bench/profile_summary.py TAG FILE... — the kernels of one profiled step (ncu --csv --page raw, as bench/profile.sh
runs it; the CSV may sit in any of the files, after other output) grouped by family: count, summed time and its
share, DRAM bytes moved, their rate over the family's time, the time-weighted DRAM and SM throughput (% of peak)
and tensor-pipe activity."""
import csv, io, re, sys

def family(name):
    n = name.strip()
    if re.match(r"(sm\d+_xmma|nvjet|cutlass|ampere_|sm90_|gemm|Kernel2|gemv)", n, re.I) or "gemm" in n.lower():
        return "cuBLASLt GEMM"
    n = re.sub(r"^void\s+", "", n)
    return re.split(r"[<(]", n)[0]

def rows_of(paths):
    for p in paths:
        try:
            text = open(p, errors="replace").read()
        except OSError:
            continue
        i = text.find('"ID","Process ID"')
        if i < 0:
            continue
        lines = [l for l in text[i:].splitlines() if l.startswith('"')]
        r = list(csv.reader(io.StringIO("\n".join(lines))))
        head, units, body = r[0], r[1], r[2:]
        return head, units, body
    return None, None, []

def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0

def main():
    tag, paths = sys.argv[1], sys.argv[2:]
    head, units, body = rows_of(paths)
    if not body:
        print(f"{tag}: no ncu rows found in {', '.join(paths)}")
        return 1
    col = {h: i for i, h in enumerate(head)}
    def get(row, key):
        i = col.get(key)
        if i is None:
            return 0.0
        v = num(row[i])
        u = units[i]
        if key.startswith("gpu__time_duration"):  # to microseconds
            v *= {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}[u]
        elif key.startswith("dram__bytes"):  # to bytes
            v *= {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}[u]
        return v
    tensor = [h for h in head if h.startswith("sm__pipe_tensor_op") and h.endswith(".avg.pct_of_peak_sustained_elapsed")]
    fam = {}
    for row in body:
        f = family(row[col["Kernel Name"]])
        t = get(row, "gpu__time_duration.sum")
        b = get(row, "dram__bytes_read.sum") + get(row, "dram__bytes_write.sum")
        a = fam.setdefault(f, [0, 0.0, 0.0, 0.0, 0.0, 0.0])
        a[0] += 1; a[1] += t; a[2] += b
        a[3] += t * get(row, "dram__throughput.avg.pct_of_peak_sustained_elapsed")
        a[4] += t * get(row, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
        a[5] += t * sum(get(row, h) for h in tensor)
    total = sum(a[1] for a in fam.values())
    print(f"## {tag}: {len(body)} kernels, {total:.1f} us summed (each kernel alone under ncu)")
    print("| kernel family | count | time us | share | DRAM MB | DRAM TB/s | DRAM % peak | SM % peak | tensor % |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for f, a in sorted(fam.items(), key=lambda kv: -kv[1][1]):
        t = a[1] or 1e-9
        print(f"| {f} | {a[0]} | {a[1]:.1f} | {100 * a[1] / total:.1f}% | {a[2] / 1e6:.1f} | {a[2] / t / 1e6:.2f} | "
              f"{a[3] / t:.1f} | {a[4] / t:.1f} | {a[5] / t:.1f} |")
    # the first kernels in launch order (the embedding, then layer 0, of the first part): one layer's sequence
    print(f"\nfirst {min(FIRST, len(body))} kernels of {tag} in launch order:")
    print("| kernel | grid | time us | DRAM MB | DRAM % peak | SM % peak | tensor % |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in body[:FIRST]:
        name = re.sub(r"^void\s+", "", row[col["Kernel Name"]])
        name = name if family(name) != "cuBLASLt GEMM" else name.split("(")[0]
        name = re.split(r"\(", name)[0][:60]
        print(f"| {name} | {row[col['Grid Size']]} | {get(row, 'gpu__time_duration.sum'):.1f} | "
              f"{(get(row, 'dram__bytes_read.sum') + get(row, 'dram__bytes_write.sum')) / 1e6:.1f} | "
              f"{get(row, 'dram__throughput.avg.pct_of_peak_sustained_elapsed'):.1f} | "
              f"{get(row, 'sm__throughput.avg.pct_of_peak_sustained_elapsed'):.1f} | {sum(get(row, h) for h in tensor):.1f} |")
    return 0

FIRST = 9

if __name__ == "__main__":
    sys.exit(main())
