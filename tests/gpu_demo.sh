#!/bin/bash
# The batch-file demo on the GPU (issue 8): ./demo --batch-file on CUDA in F32 and F16, against the CPU,
# and demo_mpi sharding the same file over 2 ranks on the GPU(s). Needs ./demo, ./demo_mpi and a GPU.
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
echo "gpu_demo: $([ $fail = 0 ] && echo ok || echo FAILED)"
exit $fail
