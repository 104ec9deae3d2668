#!/usr/bin/env bash
# LoRA serving throughput (docs/benchmarks.md, "LoRA adapters"): one workload of REQUESTS greedy
# requests through `pagoda batch`, run on the base model alone and with 1, 4 and 16 rank-RANK
# adapters (on every projection of every layer) spread round-robin over the requests, so each step
# mixes adapters, for each adapter number type in TYPES (f32: as gen-model writes by default; f16: as
# llama.cpp's convert_lora_to_gguf writes by default; f32:bf16: the f32 files under --lora-dtype bf16);
# then the time to first token of a request for an adapter the server has evicted (`serve --max-loras
# 1`, read again from disk). Each prompt begins with its own number, so no two share a prefix-cache
# block: the base alone would otherwise reuse one prompt prefix for every request, which requests of
# different adapters never can (the cache is keyed by adapter), and the ratio would measure that
# rather than the adapters' cost. SHARED_PREFIX=1: the prompts share their first words instead.
# Usage: scripts/bench_lora.sh BUILD_DIR [OUT_DIR]
set -euo pipefail
bin="${1:?usage: bench_lora.sh BUILD_DIR [OUT_DIR]}/pagoda"
out="${2:-$(mktemp -d)}"
threads="${THREADS:-2}" requests="${REQUESTS:-32}" tokens="${TOKENS:-32}" rank="${RANK:-16}" types="${TYPES:-f32 f16 f32:bf16}"
mkdir -p "$out"
model="$out/base.gguf"
# ~55 M parameters, f32: decode is memory-bound here as a real model's is. A rank-16 adapter on all
# seven projections is 2.5 % of these weights (a 7 B model's: 0.8 %), and a step streams every
# adapter its rows use, so the cost of many adapters is larger here than on a real model.
shape=(--layers 4 --dim 1024 --heads 16 --kv-heads 16 --ffn 2816 --seed 5)
"$bin" gen-model "${shape[@]}" -o "$model" 2>/dev/null
for type in $(printf '%s\n' $types | cut -d: -f1 | sort -u); do
  for i in $(seq 0 15); do
    "$bin" gen-model "${shape[@]}" -o "$out/tmp.gguf" --lora-out "$out/$type-a$i.gguf" --lora-rank "$rank" \
      --lora-seed "$((100 + i))" --lora-type "$type" 2>/dev/null
  done
done
rm -f "$out/tmp.gguf"
lines() {  # $1: adapters (0: the base model)
  for r in $(seq 0 $((requests - 1))); do
    if [ "$1" = 0 ]; then m=""; else m="\"model\": \"a$((r % $1))\", "; fi
    if [ "${SHARED_PREFIX:-0}" = 1 ]; then p="Once upon a time $r"; else p="$r: once upon a time"; fi
    echo "{${m}\"prompt\": \"$p\", \"max_tokens\": $tokens, \"temperature\": 0, \"ignore_eos\": true}"
  done
}
run() {  # $1: adapters, $2: their number type (FILE_TYPE or FILE_TYPE:LORA_DTYPE)
  local flags=()
  for i in $(seq 0 $(($1 - 1))); do flags+=(--lora "a$i=$out/${2%%:*}-a$i.gguf"); done
  case "$2" in *:*) [ "$1" = 0 ] || flags+=(--lora-dtype "${2#*:}") ;; esac
  lines "$1" > "$out/in$1.jsonl"
  "$bin" batch -m "$model" -i "$out/in$1.jsonl" -o "$out/out$1.jsonl" -t "$threads" --max-seqs 16 "${flags[@]}" 2>&1 |
    sed -n 's/.*(\([0-9.]*\) generated tokens\/s).*/\1/p'
}
# Interleaved rounds, the best of each (the hosts are shared: a round can be slowed by a neighbour).
rounds="${ROUNDS:-3}"
declare -A best
for r in $(seq 1 "$rounds"); do
  t=$(run 0 none)
  best[0]=$(python3 -c "print(max(${best[0]:-0}, $t))")
  for type in $types; do
    for n in 1 4 16; do
      t=$(run "$n" "$type")
      best[$type$n]=$(python3 -c "print(max(${best[$type$n]:-0}, $t))")
    done
  done
done
echo "host: $(nproc) cores; model: ${shape[*]}; $requests requests x $tokens tokens, --max-seqs 16, -t $threads"
echo "base alone: ${best[0]} generated tokens/s (best of $rounds)"
for type in $types; do
  for n in 1 4 16; do
    echo "$n $type adapters: ${best[$type$n]} generated tokens/s ($(python3 -c "print(f'{${best[$type$n]} / ${best[0]}:.2f}')")x the base)"
  done
done
first=${types%% *}; first=${first%%:*}

# Time to first token, warm and cold: with --max-loras 1, asking for a1 evicts a0, so the next
# request for a0 reads it again from disk before its prefill.
log="$out/serve.log"
"$bin" serve -m "$model" --port 0 -t "$threads" --max-loras 1 --lora "a0=$out/$first-a0.gguf" --lora "a1=$out/$first-a1.gguf" \
  2> "$log" & pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's/.*listening on .*:\([0-9]*\).*/\1/p' "$log" | head -1)
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
ttft() {  # seconds for a one-token request for model $1 (its time to first token: the prefill and one token)
  curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/v1/completions" \
    -d "{\"model\": \"$1\", \"prompt\": \"Once upon a time\", \"max_tokens\": 1}"
}
ttft a0 >/dev/null
warm=() cold=()
for _ in 1 2 3 4 5; do
  warm+=("$(ttft a0)")
  ttft a1 >/dev/null  # evicts a0
  cold+=("$(ttft a0)")  # reads a0 again
done
median() { printf '%s\n' "$@" | sort -n | sed -n 3p; }
echo "time to first token (median of 5), adapter in memory: $(median "${warm[@]}") s; evicted, read again: $(median "${cold[@]}") s"
kill $pid
