#!/usr/bin/env bash
# Prompt lookup (--draft-ngram) on a copy-heavy workload over a memory-bound model, side by side in
# one run. No trained model of a memory-bound size is among the fixtures, and a random model's
# continuations never repeat its prompt, so the workload is built mechanically:
#   - the model: `gen-model --preset small --type f16 --embed-scale 64` (257 MiB, bigger than the
#     L3 of the hosts seen): the current token dominates its residual stream, so greedy decoding
#     follows a near-fixed next-token map;
#   - each prompt (an extraction-style request): an opening sentence P_i, the model's own greedy
#     continuation G_i of it (GEN tokens), then P_i again — the answer reproduces G_i, which the
#     prompt holds, as a model asked to quote or edit a passage would.
# Each setting runs `pagoda batch` on those requests (OUT tokens each) with and without
# --draft-ngram 3, at concurrency 1 (--max-seqs 1, 4 requests) and 8 (8 requests); the time is
# batch's own "requests ran … s" (after the model loaded, prompts included: the same prompts in both
# settings). Settings alternate within each round; the last row is the median over rounds.
#   bench/run_copy_speculation_bench.sh [OUT_DIR]     env: ROUNDS=2 GEN=160 OUT=128 THREADS=2 TYPE=f16
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/tmp/pagoda-copy-bench}
mkdir -p "$dir"
bin=${PAGODA_BIN:-$PWD/build/pagoda}
rounds=${ROUNDS:-2} gen=${GEN:-160} out=${OUT:-128} threads=${THREADS:-2} type=${TYPE:-f16}
f16=$dir/copy-small-f16.gguf
[ -f "$f16" ] || $bin gen-model --preset small --type f16 --embed-scale 64 -o "$f16" 2>/dev/null
model=$dir/copy-small-$type.gguf
[ -f "$model" ] || $bin quantize "$f16" "$model" "$type" >/dev/null 2>&1
openings=("Once upon a time there was a little girl" "The committee met on Tuesday to review" "Please extract the dates from the" \
  "In the beginning the engineers wrote" "A quick brown fox jumps over" "The report below lists every" \
  "Summarise the following paragraph in" "Here is the contract that we signed")
: > "$dir/pairs.txt"  # the continuations are the model's own (this type's) greedy text
for p in "${openings[@]}"; do
  ids=$(printf '%s' "$p" | $bin tokenize -m "$model" 2>/dev/null)
  cont=$($bin run -m "$model" -p "$p" -n "$gen" --temp 0 -t "$threads" --ids 2>/dev/null)
  echo "$ids|$cont" >> "$dir/pairs.txt"
done
make_requests() {  # N MAX_TOKENS FILE
  python3 - "$dir/pairs.txt" "$1" "$2" "$3" <<'PY'
import json, sys
pairs = [l.rstrip("\n").split("|") for l in open(sys.argv[1]) if l.strip()]
n, max_tokens, path = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(path, "w") as f:
    for i in range(n):
        p, g = ([int(x) for x in s.split()] for s in pairs[i % len(pairs)])
        body = {"model": "m", "prompt": p + g + p[1:], "max_tokens": max_tokens, "temperature": 0}
        f.write(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}) + "\n")
PY
}
ran() { "$@" >/dev/null 2>"$dir/last.log"; sed -n 's/.*requests ran \([0-9.]*\) s.*/\1/p' "$dir/last.log"; }
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: small $type, --embed-scale 64 ($(du -mL "$model" | cut -f1) MiB); prompts of $((gen + 19))-$((gen + 25)) tokens, $out out"
echo
echo "| concurrency | round | s, no speculation | s, --draft-ngram 3 | acceptance | steps with speculation | speed-up |"
echo "| ---: | ---: | ---: | ---: | ---: | --- | ---: |"
for c in 1 8; do
  ratios=()
  n=$((c > 4 ? c : 4))
  make_requests "$n" "$out" "$dir/req.jsonl"
  for round in $(seq "$rounds"); do
    declare -A t=() steps=()
    acc=""
    for mode in off on; do
      flags=(--max-seqs "$c" -t "$threads")
      [ "$mode" = on ] && flags+=(--draft-ngram 3)
      t[$mode]=$(ran $bin batch -m "$model" -i "$dir/req.jsonl" -o "$dir/out-$mode.jsonl" "${flags[@]}")
      steps[$mode]=$(sed -n 's/.* \([0-9]*\) steps$/\1/p' "$dir/last.log")
      [ "$mode" = on ] && acc=$(sed -n 's/.*(\([0-9]*%\)).*/\1/p' "$dir/last.log")
      [ -n "${steps[$mode]}" ] || steps[$mode]="?"
    done
    python3 - "$dir/out-off.jsonl" "$dir/out-on.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["response"]["body"]["choices"][0]["text"] for l in open(p)] for p in sys.argv[1:3])
if a != b: sys.exit("outputs differ with and without speculation")
PY
    speed=$(python3 -c "print(f'{${t[off]} / ${t[on]}:.2f}')")
    ratios+=("$speed")
    echo "| $c | $round | ${t[off]} | ${t[on]} | ${acc:-—} | ${steps[on]} | ${speed}× |"
  done
  echo "| $c | median | | | | | **$(python3 -c "import statistics, sys; print(f'{statistics.median(map(float, sys.argv[1:])):.2f}')" "${ratios[@]}")×** |"
done
