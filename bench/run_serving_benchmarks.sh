#!/usr/bin/env bash
# Serving benchmarks for docs/benchmarks.md on the `small` preset:
#  1. `pagoda bench-throughput` (engine only): concurrency 1/4/16/64, continuous vs static batching,
#     with and without a 90 % shared prompt prefix;
#  2. `pagoda bench-serve` against `pagoda serve` (HTTP + SSE): 32 requests, ~200-token prompts
#     sharing 150 tokens, 64 output tokens, concurrency 1 and 8.
#   bench/run_serving_benchmarks.sh [MODEL.gguf]   (default: build/bench-models/small-q4_0.gguf)
# Needs a built pagoda and the model (bench/run_model_benchmarks.sh makes it). Several minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/pagoda
model=${1:-build/bench-models/small-q4_0.gguf}
threads=${THREADS:-2}
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d); model $model"

echo "## engine: bench-throughput"
for prefix in 0 0.9; do
  for c in 1 4 16 64; do
    n=$(( c < 16 ? 16 : c ))
    for mode in continuous static; do
      extra=()
      [ "$mode" = static ] && extra=(--static-batching)
      echo "### concurrency $c, shared prefix $prefix, $mode: $bin bench-throughput -m $model --requests $n --concurrency $c --prompt-len 200 --output-len 64 --shared-prefix $prefix -t $threads ${extra[*]}"
      "$bin" bench-throughput -m "$model" --requests "$n" --concurrency "$c" --prompt-len 200 --output-len 64 \
        --shared-prefix "$prefix" -t "$threads" "${extra[@]}"
    done
  done
done

echo "## server: bench-serve"
port=${PORT:-18123}
"$bin" serve -m "$model" --port "$port" -t "$threads" --max-seqs 16 >build/bench-serve-server.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.5
done
for c in 1 8; do
  echo "### concurrency $c: $bin bench-serve --url http://127.0.0.1:$port --requests 32 --concurrency $c --prompt-len 200 --shared-prefix 150 --output-len 64 --stream"
  "$bin" bench-serve --url "http://127.0.0.1:$port" --requests 32 --concurrency "$c" --prompt-len 200 \
    --shared-prefix 150 --output-len 64 --stream
done
