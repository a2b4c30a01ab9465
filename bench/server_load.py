"""Load test of ./server over loopback: tokens/s and latency percentiles with 1, 16 and 256 concurrent streaming
clients, beside the same requests run by ./demo --batch-file (no HTTP) for comparison.

    python3 bench/server_load.py [--server ./server] [--demo ./demo] [--backend cpu] [--clients 1,16,256]
                                 [--max-tokens 32] [--requests-per-client 2] [--procs P] [-m DIR]

Each request: one of four short prompts, max_tokens tokens (ignore_eos, so each makes exactly that many),
temperature 0.8, top_k 40, its own seed. With C clients, each client sends its requests one after another and
2 x C requests go (at least 16). The server is started on a free loopback port and stopped (SIGTERM) at the end.
Bounded: each level's requests time out after 300 s."""
import argparse
import concurrent.futures
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

PROMPTS = ["ROMEO:", "JULIET:", "KING HENRY:", "First Citizen:\nBefore we proceed any further, hear me speak."]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def request(i, args):
    return {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": args.max_tokens, "temperature": 0.8, "top_k": 40,
            "seed": i, "ignore_eos": True}


def stream_one(port, body):
    """(time to the first chunk with text, total time) of one streamed completion"""
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"status {r.status}: {r.read()[:200]!r}")
    ttft = None
    for line in r:
        if not line.startswith(b"data: "):
            continue
        if line.startswith(b"data: [DONE]"):
            break
        if ttft is None and b'"text":""' not in line:  # no JSON parse: the client's time is the server's
            ttft = time.perf_counter() - t0
    c.close()
    return ttft if ttft is not None else time.perf_counter() - t0, time.perf_counter() - t0


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run_clients(port, clients, ids, args):
    """clients threads streaming the requests ids: (ttfts, latencies, errors)"""
    todo = list(ids)
    lock = threading.Lock()
    ttft, lat, errors = [], [], []

    def client():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            try:
                a, b = stream_one(port, request(i, args))
                with lock:
                    ttft.append(a)
                    lat.append(b)
            except Exception as e:  # noqa: BLE001 (counted and reported)
                with lock:
                    errors.append(repr(e))
    ts = [threading.Thread(target=client) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return ttft, lat, errors


def run_level(port, clients, args):
    """clients concurrent clients over --procs processes (so that Python's own lock does not cap the clients)"""
    n = max(args.requests_per_client * clients, 16)
    procs = max(1, min(args.procs, clients))
    t0 = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(procs) as ex:
        parts = [ex.submit(run_clients, port, clients // procs + (p < clients % procs), range(p, n, procs), args)
                 for p in range(procs)]
        ttft, lat, errors = [], [], []
        for f in parts:
            a, b, e = f.result()
            ttft += a
            lat += b
            errors += e
    wall = time.perf_counter() - t0
    return n, wall, ttft, lat, errors


def run_demo(n, args):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for i in range(n):
            r = request(i, args)
            f.write(json.dumps({"prompt": r["prompt"], "max_new_tokens": r["max_tokens"], "temperature": 0.8,
                                "top_k": 40, "seed": i}) + "\n")
    cmd = [args.demo, "-m", args.model, "--backend", args.backend, "--stats", "--batch-file", f.name, "-o", os.devnull]
    err = subprocess.run(cmd, check=True, timeout=600, capture_output=True, text=True).stderr
    os.unlink(f.name)
    # --stats: "generated: N tokens in X s (R tokens/s)", the generation alone (no load)
    line = next(x for x in err.splitlines() if x.startswith("generated:"))
    return float(line.split()[1]) / float(line.split()[4])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="./server")
    ap.add_argument("--demo", default="./demo")
    ap.add_argument("-m", "--model", default="weights")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--clients", default="1,16,256")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--procs", type=int, default=min(8, os.cpu_count() or 1), help="client processes")
    ap.add_argument("--server-args", default="", help="more options for ./server, e.g. '--max-batch 64'")
    args = ap.parse_args()
    port = free_port()
    srv = subprocess.Popen([args.server, "-m", args.model, "--backend", args.backend, "--port", str(port),
                            *args.server_args.split()], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit(f"the server did not come up: {srv.stderr.read() if srv.poll() is not None else 'no answer on /health'}")
        print(f"{'clients':>7} {'requests':>8} {'tokens':>7} {'server tok/s':>12} {'demo tok/s':>10} {'ratio':>6} "
              f"{'ttft p50':>9} {'ttft p99':>9} {'lat p50':>8} {'lat p90':>8} {'lat p99':>8} errors")
        for c in [int(x) for x in args.clients.split(",")]:
            n, wall, ttft, lat, errors = run_level(port, c, args)
            tokens = len(lat) * args.max_tokens
            dtps = run_demo(n, args)
            stps = tokens / wall
            ms = lambda x: f"{1000 * x:.0f}ms"  # noqa: E731
            print(f"{c:>7} {n:>8} {tokens:>7} {stps:>12.0f} {dtps:>10.0f} {stps / dtps:>6.2f} "
                  f"{ms(pct(ttft, 50)):>9} {ms(pct(ttft, 99)):>9} {ms(pct(lat, 50)):>8} {ms(pct(lat, 90)):>8} "
                  f"{ms(pct(lat, 99)):>8} {len(errors)}" + (f" first: {errors[0]}" if errors else ""), flush=True)
    finally:
        srv.terminate()
        try:
            rc = srv.wait(30)
        except subprocess.TimeoutExpired:
            srv.kill()
            rc = "killed"
        print(f"server exit status after SIGTERM: {rc}")
        head = srv.stderr.read().splitlines()[:1]
        if head:
            print(head[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
