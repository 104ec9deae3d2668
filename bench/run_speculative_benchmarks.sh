#!/usr/bin/env bash
# Speculative decoding side by side in one run: an F16 random-weight target decoding greedily with no
# speculation, with a Q4_0 copy and with a Q8_0 copy of itself as --draft-model, at concurrency 1 and
# 8 (pagoda bench-throughput: prompts of 64 tokens, OUTPUT_LEN out, max(2, C) * REQUESTS_PER_SLOT requests), alternating
# the settings each round so a drifting host hits all alike. Prints a markdown table: output tokens/s,
# acceptance, tokens per sequence-step, the speed-up over no speculation in the same round, and per
# setting the median speed-up over the rounds.
#   bench/run_speculative_benchmarks.sh [OUT_DIR]
#   env: PRESET=tinyllama (the target's gen-model preset) OUTPUT_LEN=64 ROUNDS=1 THREADS=2 DRAFT_MAX=8
#        REQUESTS_PER_SLOT=1
# Generating and quantising a tinyllama-shaped model takes minutes; the files are kept in OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/pagoda-spec-bench}
mkdir -p "$out"
bin=${PAGODA_BIN:-build/pagoda}
preset=${PRESET:-tinyllama} olen=${OUTPUT_LEN:-64} rounds=${ROUNDS:-1} threads=${THREADS:-2} dmax=${DRAFT_MAX:-8}
per_slot=${REQUESTS_PER_SLOT:-1}
ratios=$(mktemp)
trap 'rm -f "$ratios"' EXIT
target=$out/$preset-f16.gguf
[ -f "$target" ] || $bin gen-model --preset "$preset" --type f16 -o "$target" >/dev/null
for t in q4_0 q8_0; do
  [ -f "$out/$preset-$t.gguf" ] || $bin quantize "$target" "$out/$preset-$t.gguf" "$t" >/dev/null
done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "target: $preset F16 ($(du -mL "$target" | cut -f1) MiB); drafts: Q4_0 ($(du -mL "$out/$preset-q4_0.gguf" | cut -f1) MiB), Q8_0 ($(du -mL "$out/$preset-q8_0.gguf" | cut -f1) MiB)"
echo "command: bench-throughput -m TARGET --requests max(2,C)*$per_slot --prompt-len 64 --output-len $olen --concurrency C -t $threads [--draft-model DRAFT --draft-max $dmax]"
echo
echo "| concurrency | draft | round | output tok/s | acceptance | tokens per sequence-step | speed-up |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"
for c in 1 8; do
  requests=$(((c > 2 ? c : 2) * per_slot))
  for round in $(seq "$rounds"); do
    base=""
    for d in none q4_0 q8_0; do
      flags=()
      [ "$d" = none ] || flags=(--draft-model "$out/$preset-$d.gguf" --draft-max "$dmax")
      log=$($bin bench-throughput -m "$target" --requests "$requests" --prompt-len 64 --output-len "$olen" \
        --concurrency "$c" -t "$threads" "${flags[@]}" 2>/dev/null)
      tps=$(echo "$log" | sed -n 's/.*| \([0-9.]*\) output tokens\/s.*/\1/p')
      acc=$(echo "$log" | sed -n 's/^speculation: .*(\([0-9.]*%\)).*/\1/p')
      per=$(echo "$log" | sed -n 's/^speculation: .*, \([0-9.]*\) output tokens per sequence-step/\1/p')
      [ "$d" = none ] && base=$tps
      speed=$(python3 -c "print(f'{$tps / $base:.2f}×')")
      echo "| $c | ${d/none/—} | $round | $tps | ${acc:-—} | ${per:-1.00} | $speed |"
      echo "$c ${d/none/—} $(python3 -c "print($tps / $base)")" >> "$ratios"
    done
  done
done
echo
echo "| concurrency | draft | median speed-up over $rounds rounds |"
echo "| ---: | --- | ---: |"
python3 - "$ratios" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    c, d, r = line.split()
    by.setdefault((int(c), d), []).append(float(r))
for (c, d), rs in sorted(by.items()):
    print(f"| {c} | {d} | {statistics.median(rs):.2f}× |")
PY
