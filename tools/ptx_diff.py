#!/usr/bin/env python3
"""ptx_diff.py — which kernels a change to gpt2.cuh really moved, compared as PTX (no GPU needed).

Usage: python3 tools/ptx_diff.py REF [REF2] [--src bench/bench_gpt2.cu] [--arch sm_90a] [--runs N] [--show TEXT]
                                [--rename FILE]

Builds --src (default bench/bench_gpt2.cu, which instantiates every kernel form the engine launches) to PTX at git
ref REF and at REF2 (default: the working tree), and lists the kernels whose PTX differs once label numbers and
the compiler's per-build internal names are normalized, plus the kernels only one side has. nvcc 13.0 did not
emit the same PTX for the same source every time (RESULTS.md item 116: gpt2__attn_mma_kernel's merge, until its
loads were written out), and another compiler may do so elsewhere, so with --runs N (default 2) each side is built
N times and a kernel that already differs between builds of one side is reported as unstable rather than as moved
by the change. --show TEXT prints the normalized PTX diff (first builds) of each moved kernel whose name contains
TEXT ("" for all of them). --rename FILE names symbols the change renamed: each line "OLD NEW" (# starts a comment)
replaces OLD by NEW in REF's PTX, in order, before the two sides are compared; both sides' mangled-name length
prefixes of gpt2__ names are dropped, so a kernel renamed so keeps its name and is compared body for body.
"""
import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile


def ptx_kernels(text, renames=(), strip=False):
    """kernel (.entry) and device function (.func, the noinline ones) name -> normalized body"""
    for old, new in renames:
        text = text.replace(old, new)
    if strip:
        text = re.sub(r"\d+(?=gpt2__)", "", text)  # the mangled length of a (renamed) name
    out = {}
    for m in re.finditer(r"^(?:\.visible |\.weak )?\.(entry|func)\s+(?:\([^)]*\)\s*)?(\S+)\(", text, re.M):
        name, start = m.group(2), m.start()
        brace, semi = text.find("{", m.end()), text.find(";", m.end())
        if brace < 0 or (0 <= semi < brace and text[m.end():semi].count("(") <= text[m.end():semi].count(")")):
            continue  # a declaration
        end = text.find("\n}\n", start)
        body = text[start:end].replace(name, "F")
        name = re.sub(r"_INTERNAL_[0-9a-f]+_", "_INTERNAL_X_", name)
        body = re.sub(r"\$L__BB\d+_", "$L__BB_", body)
        body = re.sub(r"_INTERNAL_[0-9a-f]+_", "_INTERNAL_X_", body)
        body = re.sub(r"_ZZ\w+?E(\d+[A-Za-z_]\w*)", r"_ZZ_\1", body)  # a function's static shared variables
        out[name] = body
    return out


def build(root, src, arch, runs, tmp, tag, renames=(), strip=False):
    """the kernels of each of `runs` builds of src under root"""
    outs = []
    for i in range(runs):
        ptx = os.path.join(tmp, f"{tag}{i}.ptx")
        cmd = ["nvcc", "-ptx", "-x", "cu", "-O3", "-std=c++17", f"-arch={arch}", "-I", root, os.path.join(root, src), "-o", ptx]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"nvcc failed for {tag}:\n{r.stderr[-2000:]}")
        with open(ptx) as f:
            outs.append(ptx_kernels(f.read(), renames, strip))
    return outs


def unstable(builds):
    names = set(builds[0])
    return {k for k in names if any(b.get(k) != builds[0][k] for b in builds[1:])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ref")
    ap.add_argument("ref2", nargs="?")
    ap.add_argument("--src", default="bench/bench_gpt2.cu")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--show", default=None, help="print the PTX diff of moved kernels whose name contains this")
    ap.add_argument("--rename", default=None, help="file of 'OLD NEW' lines: symbols the change renamed")
    a = ap.parse_args()
    renames = []
    if a.rename:
        with open(a.rename) as f:
            for line in f:
                w = line.split("#")[0].split()
                if len(w) == 2:
                    renames.append((w[0], w[1]))
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        roots = []
        for i, ref in enumerate([a.ref, a.ref2]):
            if ref is None:
                roots.append(top)
                continue
            d = os.path.join(tmp, f"tree{i}")
            os.makedirs(d)
            arch = subprocess.run(["git", "-C", top, "archive", ref], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", d], input=arch, check=True)
            roots.append(d)
        A = build(roots[0], a.src, a.arch, a.runs, tmp, "a", renames, bool(a.rename))
        B = build(roots[1], a.src, a.arch, a.runs, tmp, "b", (), bool(a.rename))
    noisy_a, noisy_b = unstable(A), unstable(B)
    noisy = noisy_a | noisy_b
    a0, b0 = A[0], B[0]
    moved = sorted(k for k in a0 if k in b0 and k not in noisy and a0[k] != b0[k])
    # a kernel renamed by the change (a template parameter added) with the same PTX
    only_a, only_b = set(a0) - set(b0), set(b0) - set(a0)
    renamed = []
    for k in sorted(only_a):
        same = [j for j in sorted(only_b) if b0[j] == a0[k]]
        if same:
            renamed.append(f"{k} -> {same[0]}")
            only_a.discard(k)
            only_b.discard(same[0])
    b_name = a.ref2 or "the working tree"
    print(f"{len(a0)} kernels in {a.ref}, {len(b0)} in {b_name} ({a.runs} builds each)")
    for title, names in (("moved by the change", moved), (f"unstable between builds of {a.ref}", sorted(noisy_a)),
                         (f"unstable between builds of {b_name}", sorted(noisy_b)),
                         ("renamed, the same PTX", renamed), (f"only in {a.ref}", sorted(only_a)),
                         (f"only in {b_name}", sorted(only_b))):
        print(f"{title}: {len(names)}")
        for k in names:
            print("  " + k)
    if a.show is not None:
        for k in moved:
            if a.show in k:
                print(f"\n--- {k}: {a.ref} -> {b_name}")
                print("\n".join(difflib.unified_diff(a0[k].splitlines(), b0[k].splitlines(), lineterm="", n=2)))


if __name__ == "__main__":
    main()
