"""What the fastest kernels PyTorch reaches on this GPU take for the pieces of issue 5's missed targets, with none
of gpt2.cuh's rules (no batch invariance, no K/V cache to fill): RESULTS.md item 176.

  python3 bench/torch_kernels.py            prompt attention (16 x 1024, causal, head size 64, F16) for 124M's
                                            12 layers and 1558M's 48 through each SDPA backend, q/k/v contiguous
                                            [B][H][T][64] and as strided views of one [B][T][3][H][64] buffer; then
                                            the four products of every layer through torch.addmm (cuBLAS's own
                                            pick, split K allowed), each layer its own weights so they come from
                                            DRAM as in a step: 124M at 16,384, 1024 and 512 rows, 1558M at 256.
                                            CUDA graphs, CUDA events, median of 10 replays.
  python3 bench/torch_kernels.py cudnn      one cuDNN SDPA call at 124M's prefill shape between
                                            cudaProfilerStart/Stop, for `ncu --profile-from-start off`.
Random operands: only shapes matter for time."""
import statistics, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

dev = "cuda"
B, T, D = 16, 1024, 64


def timed(fn, reps=10):
    """median ms of one replay of fn captured in a CUDA graph"""
    g, s = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3): g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def attention():
    for name, H, L in (("124M", 12, 12), ("1558M", 25, 48)):
        qkv = [torch.randn(B, T, 3, H, D, device=dev, dtype=torch.half) for _ in range(12)]
        flop = L * B * H * 4 * D * (T * (T + 1) / 2)  # causal: two products over the keys at or before each query
        for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
            for layout in ("bhtd", "strided"):
                ins = []
                for t in qkv:
                    q, k, v = (t[:, :, i].transpose(1, 2) for i in range(3))
                    ins.append((q.contiguous(), k.contiguous(), v.contiguous()) if layout == "bhtd" else (q, k, v))

                def run():
                    for l in range(L):
                        F.scaled_dot_product_attention(*ins[l % len(ins)], is_causal=True)
                try:
                    with sdpa_kernel([be]):
                        ms = timed(run)
                    print(f"attention {name} {B}x{T} H{H} L{L} {be.name} {layout}: {ms:.3f} ms, {flop / ms / 1e9:.0f} TFLOP/s",
                          flush=True)
                except RuntimeError as e:
                    print(f"attention {name} {be.name} {layout}: unavailable ({str(e).splitlines()[0][:100]})", flush=True)
        del qkv
        torch.cuda.empty_cache()


def products():
    for name, C, L, M in (("124M", 768, 12, 16384), ("1558M", 1600, 48, 256), ("124M", 768, 12, 1024), ("124M", 768, 12, 512)):
        shapes = ((3 * C, C), (C, C), (4 * C, C), (C, 4 * C))
        W = [[(torch.randn(o, i, device=dev, dtype=torch.half) * 0.02, torch.randn(o, device=dev, dtype=torch.half))
              for (o, i) in shapes] for _ in range(L)]
        X = {i: torch.randn(M, i, device=dev, dtype=torch.half) for (o, i) in shapes}
        Y = [torch.empty(M, o, device=dev, dtype=torch.half) for (o, i) in shapes]

        def layers(js):
            def run():
                for l in range(L):
                    for j in js:
                        w, b = W[l][j]
                        torch.addmm(b, X[shapes[j][1]], w.t(), out=Y[j])
            return run
        ms = timed(layers(range(4)))
        per = [timed(layers([j])) for j in range(4)]
        flop = L * sum(2 * M * o * i for (o, i) in shapes)
        print(f"products {name} {M} rows x {L} layers, cuBLAS's own pick: {ms:.3f} ms ({flop / ms / 1e9:.0f} TFLOP/s); "
              "per shape " + ", ".join(f"{o}x{i} {t:.3f}" for (o, i), t in zip(shapes, per)), flush=True)
        del W, X, Y
        torch.cuda.empty_cache()


def cudnn_once():
    q, k, v = (torch.randn(B, 12, T, D, device=dev, dtype=torch.half) for _ in range(3))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        for _ in range(3): F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    torch.manual_seed(0)
    print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version(),
          torch.cuda.get_device_name(), flush=True)
    if sys.argv[1:] == ["cudnn"]:
        cudnn_once()
    else:
        attention()
        products()
