"""bench/cpu_peer_hf.py DIR WORKLOAD DTYPE REPS — Hugging Face transformers (torch, CPU) on the CPU workloads of
bench/cpu_peers.sh, on the model under DIR (config.json + model.safetensors, bench/make_random_model.py).
  WORKLOAD decode: batch 1, a prompt of 128, then 128 greedy tokens (EOS ignored): ms per token from the first
                   generated token to the last (the prompt's forward not counted), as bench_cpu's decode
  WORKLOAD prompt: one prompt of 256, time to its first token: tokens/s
  DTYPE f32 or bf16 (the weights and the arithmetic). torch's default threads (one per core).
Prints one line a run ("decode_ms_per_token X" / "prompt_tokens_per_s X"), after one untimed warm-up run (the
process's peak RSS is measured outside, by /usr/bin/time)."""
import sys, time
import torch
from transformers import GPT2LMHeadModel, StoppingCriteria, StoppingCriteriaList

d, workload, dt, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dt]
model = GPT2LMHeadModel.from_pretrained(d, dtype=dtype).eval()
model.generation_config.pad_token_id = model.generation_config.eos_token_id
ids = torch.tensor([[(i * 7919 + 13) % 50257 for i in range(256)]])  # bench_cpu's prompt tokens


class Stamp(StoppingCriteria):
    """Called after each generated token: the time of the first one, and never stops generation."""
    def __init__(self): self.first = None
    def __call__(self, input_ids, scores, **kw):
        if self.first is None: self.first = time.perf_counter()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool)


def run():
    if workload == "decode":
        gen, prompt = 128, ids[:, :128]
    else:
        gen, prompt = 1, ids
    stamp = Stamp()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=gen, min_new_tokens=gen,
                             do_sample=False, num_beams=1, use_cache=True, stopping_criteria=StoppingCriteriaList([stamp]))
    t1 = time.perf_counter()
    assert out.shape[1] == prompt.shape[1] + gen, out.shape
    if workload == "decode":
        return "decode_ms_per_token %.3f" % ((t1 - stamp.first) / (gen - 1) * 1e3)
    return "prompt_tokens_per_s %.1f" % (prompt.shape[1] / (t1 - t0))


print("transformers", __import__("transformers").__version__, "torch", torch.__version__, "threads",
      torch.get_num_threads(), dt, workload, flush=True)
run()
for _ in range(reps):
    print(run(), flush=True)
