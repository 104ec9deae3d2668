#!/usr/bin/env bash
# Time to first token of a ~2000-token prompt through `pagoda serve`, side by side:
#   cold        nothing cached: the whole prompt is computed
#   pool        the same prompt again: served by the KV pool's prefix cache
#   host tier   after another prompt evicted it from the pool: loaded from --prefix-cache-host-memory
#   file tier   after a restart of serve: loaded from --prefix-cache-dir
# The pool holds one such prompt (-c 2100, one sequence), so a second prompt evicts the first.
# TTFT is the time of a non-streamed completion of max_tokens 1 (prefill + one token), median of
# three prompts. Prints a markdown table for docs/benchmarks.md.
#   bench/run_prefix_tier_bench.sh [MODEL.gguf]   (default: build/bench-models/small-f16.gguf, made
#                                                  with `pagoda gen-model --preset small --type f16`)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/pagoda
model=${1:-build/bench-models/small-f16.gguf}
threads=${THREADS:-2}
port=${PORT:-18127}
len=${PROMPT_LEN:-2000}
reps=${REPS:-3}
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  "$bin" gen-model -o "$model" --preset small --type f16 >/dev/null
fi
dir=$(mktemp -d)
log=$(mktemp)
trap 'kill $server 2>/dev/null || true; rm -rf "$dir" "$log"' EXIT

start_server() {
  "$bin" serve -m "$model" --port "$port" -t "$threads" --max-seqs 1 -c $((len + 100)) \
    --prefix-cache-host-memory 1GiB --prefix-cache-dir "$dir" >>"$log" 2>&1 &
  server=$!
  for _ in $(seq 1 240); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return
    sleep 0.5
  done
  echo "serve did not come up; its log:" >&2
  cat "$log" >&2
  exit 1
}
stop_server() {
  kill -TERM "$server"
  wait "$server" || true
}
# A prompt of $len token ids, distinct for each seed.
prompt() { awk -v n="$len" -v s="$1" 'BEGIN { srand(s); printf "["; for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), 3 + int(rand() * 30000); printf "]" }'; }
# Seconds for one completion of max_tokens 1.
ttft() {
  curl -sf -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"prompt\": $(prompt "$1"), \"max_tokens\": 1, \"temperature\": 0}"
}
# The sum of a metric's samples whose line also contains $2.
metric() { curl -sf "http://127.0.0.1:$port/metrics" | grep "^$1" | grep -F "$2" | awk '{ sum += $NF } END { print sum + 0 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

cold=() pool=() host=() file=()
start_server
for r in $(seq 1 "$reps"); do
  a=$((100 + r)) b=$((200 + r))
  cold+=("$(ttft $a)")
  pool+=("$(ttft $a)")
  ttft $b >/dev/null  # evicts prompt a from the pool into the tier
  host+=("$(ttft $a)")
  ttft $b >/dev/null  # and again, so the restart finds a's blocks only in the files
done
host_hits=$(metric 'pagoda:prefix_cache_tier_hits_total' 'tier="host"')
spilled=$(metric 'pagoda:prefix_cache_tier_spilled_blocks_total' '')
spilled_mib=$(metric 'pagoda:prefix_cache_tier_spilled_bytes_total' '' | awk '{ printf "%.0f", $1 / 1048576 }')
spill_ms=$(metric 'pagoda:prefix_cache_tier_spill_seconds_total' '' | awk '{ printf "%.1f", $1 * 1000 }')
dropped=$(metric 'pagoda:prefix_cache_tier_file_dropped_total' '')
stop_server
start_server
for r in $(seq 1 "$reps"); do file+=("$(ttft $((100 + r)))"); done
file_hits=$(metric 'pagoda:prefix_cache_tier_hits_total' 'tier="file"')
stop_server

m() { printf '%s\n' "$@" | median; }
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, $threads threads; $(date -u +%Y-%m-%d)"
echo "model: $model ($len-token prompts, median of $reps; tier block hits: host $host_hits, file $file_hits)"
echo "spilling: $spilled blocks ($spilled_mib MiB) took $spill_ms ms of engine-thread time in all; $dropped file writes dropped"
echo
echo "| prompt served from | TTFT (s) |"
echo "| --- | --- |"
echo "| nothing (cold, computed) | $(m "${cold[@]}") |"
echo "| KV pool (prefix cache) | $(m "${pool[@]}") |"
echo "| host tier, after eviction from the pool | $(m "${host[@]}") |"
echo "| file tier, after a serve restart | $(m "${file[@]}") |"
