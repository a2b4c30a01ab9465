#!/usr/bin/env bash
# Speculation on the CPU backend: the demo (embedded model) built with speculation off (-DGPT2_SPEC_TOKENS=0) and
# as shipped, continuing a passage greedily and sampled (--temperature 0.8, the demo's top-k 40), ROUNDS times each;
# prints each run's wall time and whether the two builds printed the same text.
#   bash bench/spec_cpu.sh [TOKENS] [ROUNDS]      (default 400 tokens, 2 rounds; run from the repository root)
set -e
N=${1:-400} R=${2:-2} D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
for k in 0 default; do
  def=; [ $k = 0 ] && def=-DGPT2_SPEC_TOKENS=0
  cc -x c -O3 -std=gnu99 -fopenmp -DGPT2_NO_CUDA $def -I. demo.cu -o "$D/demo_$k" -lm
done
printf 'ROMEO:\nBut, soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n\nJULIET:\nO Romeo, Romeo! wherefore art thou Romeo?\n\nROMEO:\n' > "$D/prompt.txt"
echo "spec_cpu: $N tokens, $(nproc) cores, $(date -u)"
for t in 0 0.8; do
  for r in $(seq "$R"); do
    for k in 0 default; do
      s=$(date +%s.%N); "$D/demo_$k" -f "$D/prompt.txt" --temperature $t -n "$N" > "$D/out_${t}_$k.txt"; e=$(date +%s.%N)
      printf 'temperature %s, speculation %-7s %.2f s\n' "$t" "$k:" "$(echo "$e - $s" | bc)"
    done
  done
  cmp -s "$D/out_${t}_0.txt" "$D/out_${t}_default.txt" && echo "temperature $t: same text" || echo "temperature $t: TEXT DIFFERS"
done
