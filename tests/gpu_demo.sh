#!/bin/bash
# The batch-file demo on the GPU: ./demo --batch-file on CUDA in F32, F16 and BF16 against the CPU; demo_mpi sharding
# the same file over 2 ranks on the GPU(s); the controls with logprobs, and scoring with every token's values, through
# demo_mpi over 2 ranks against one process. Needs ./demo, ./demo_mpi (Open MPI) and a GPU.
# Usage: bash tests/gpu_demo.sh   (logs under $OUT or /tmp/gpu_demo)
out=${OUT:-/tmp/gpu_demo}; mkdir -p "$out"
f="$out/prompts.jsonl"
{
  echo '{"prompt": "ROMEO:", "max_new_tokens": 24}'
  echo '{"prompt": "JULIET: O Romeo, Romeo", "max_new_tokens": 16, "temperature": 0}'
  echo '{"prompt": "To be, or not to be", "max_new_tokens": 40, "temperature": 0.9, "seed": 7}'
  for i in $(seq 1 40); do echo "{\"prompt\": \"KING HENRY $i:\"}"; done
} > "$f"
fail=0
./demo --backend cpu -n 32 --temperature 0 --batch-file "$f" -o "$out/cpu.jsonl" 2> "$out/cpu.err" || { echo "cpu run failed"; fail=1; }
for dt in f32 f16 bf16; do
  ./demo --backend cuda --dtype $dt -n 32 --temperature 0 --stats --batch-file "$f" -o "$out/cuda_$dt.jsonl" 2> "$out/cuda_$dt.err"
  rc=$?; lines=$(wc -l < "$out/cuda_$dt.jsonl")
  same=$(python3 -c "
import json,sys
a=[json.loads(l) for l in open('$out/cpu.jsonl')]; b=[json.loads(l) for l in open('$out/cuda_$dt.jsonl')]
assert all(set(x)>={'index','prompt','text','tokens','finish_reason'} for x in b)
print(sum(x['text']==y['text'] for x,y in zip(a,b)))")
  echo "cuda $dt: rc $rc, $lines lines, $same of 43 texts equal to the CPU's; $(grep -i 'generated' "$out/cuda_$dt.err" | tail -1); $(grep -i 'speculation' "$out/cuda_$dt.err" | tail -1)"
  [ $rc = 0 ] && [ "$lines" = 43 ] || fail=1
done
mpirun --allow-run-as-root --oversubscribe -np 2 ./demo_mpi --backend cuda --dtype f16 -n 32 --temperature 0 --batch-file "$f" \
  -o "$out/mpi_f16.jsonl" 2> "$out/mpi.err"
rc=$?
if cmp -s "$out/mpi_f16.jsonl" "$out/cuda_f16.jsonl"; then echo "demo_mpi 2 ranks f16: rc $rc, identical to single-process cuda f16"
else echo "demo_mpi 2 ranks f16: rc $rc, DIFFERS from single-process"; head -c 600 "$out/mpi.err"; fail=1; fi
# the controls and logprobs on the GPU, and scoring with every token's values: demo_mpi over 2 ranks gives what one
# process gives, byte for byte (requests cross ranks with their lists; logprobs, ranks and sums come back to rank 0)
g="$out/controls.jsonl"; t="$out/texts.jsonl"
{
  echo '{"prompt": "ROMEO:", "max_new_tokens": 24, "repetition_penalty": 1.3, "logprobs": 3}'
  echo '{"prompt": "JULIET:", "max_new_tokens": 24, "temperature": 0.9, "seed": 3, "presence_penalty": 0.5, "frequency_penalty": 0.4, "min_p": 0.05, "logprobs": 0}'
  echo '{"prompt": "KING:", "max_new_tokens": 32, "no_repeat_ngram_size": 2, "logit_bias": {"198": "-inf", "11": 2.5}, "stop": ["\n\n", "lord"], "logprobs": 5}'
  echo '{"prompt": "First Citizen:", "max_new_tokens": 20, "temperature": 1.0, "typical_p": 0.8, "top_k": 0, "seed": 11, "min_new_tokens": 8, "stop_at_eos": true}'
} > "$g"
python3 -c "
import json
verse = 'Now is the winter of our discontent made glorious summer by this sun of York; '
for x in ['', 'O', 'To be, or not to be, that is the question.', verse * 80, 'O Romeo, Romeo! wherefore art thou Romeo? ' * 9]:
    print(json.dumps({'text': x}))" > "$t"
for run in cuda mpi; do
  pre=""; [ $run = mpi ] && pre="mpirun --allow-run-as-root --oversubscribe -np 2"
  bin=./demo; [ $run = mpi ] && bin=./demo_mpi
  $pre $bin --backend cuda --dtype f16 --spec 0 --batch-file "$g" -o "$out/controls_$run.jsonl" 2> "$out/controls_$run.err" &&
  $pre $bin --backend cuda --dtype bf16 --score --stride 384 --logprobs --batch-file "$t" -o "$out/score_$run.jsonl" 2> "$out/score_$run.err" ||
    { echo "$run controls/score run failed: $(head -c 300 "$out/controls_$run.err" "$out/score_$run.err")"; fail=1; }
done
checked=$(python3 -c "
import json
c=[json.loads(l) for l in open('$out/controls_cuda.jsonl')]; s=[json.loads(l) for l in open('$out/score_cuda.jsonl')]
assert len(c)==4 and all('logprobs' in x for x in c[:3]) and len(c[2]['logprobs'][0]['top'])==5, 'controls: logprobs missing'
assert len(s)==5 and s[0]['perplexity'] is None and s[1]['perplexity'] is None and s[3]['tokens']>1024, 'score: counts'
assert len(s[3]['logprobs'])==s[3]['tokens']-1 and len(s[3]['ranks'])==s[3]['tokens']-1, 'score: per-token values'
print(sum(len(x['logprobs']) for x in c[:3]), 'generated logprobs,', sum(len(x.get('logprobs',[])) for x in s), 'scored')" 2>&1)
for k in controls score; do
  if cmp -s "$out/${k}_cuda.jsonl" "$out/${k}_mpi.jsonl"; then echo "demo_mpi 2 ranks $k: identical to single-process cuda ($checked)"
  else echo "demo_mpi 2 ranks $k: DIFFERS from single-process ($checked)"; fail=1; fi
done
echo "$checked" | grep -q "generated logprobs" || fail=1
echo "gpu_demo: $([ $fail = 0 ] && echo ok || echo FAILED)"
exit $fail
