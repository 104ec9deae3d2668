#!/usr/bin/env bash
# Embeddings per second of a BERT-base-shaped random encoder (12 layers, dim 768, 12 heads, FFN 3072,
# 512 positions, mean pooling) served by `pagoda serve` over /v1/embeddings, inputs of 128 token ids:
# batch 1 (one input per request, requests back to back) and batch 32 (32 inputs per request, which
# the engine runs as one step). Time is wall clock at the client, HTTP and JSON included.
#   bench/run_encoder_bench.sh [TYPE]     TYPE: f16 (default) or q8_0
# The vocabulary is copied from VOCAB (default the llama-spm fixture, 32000 tokens, beside BERT's
# 30522: only the rows of the input ids are read, so the speed does not depend on it) until a WordPiece
# tokenizer loads gen-model's own. Needs a built pagoda; a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/pagoda
type=${1:-f16}
threads=${THREADS:-2}
vocab=${VOCAB:-../shared/vocab/ggml-vocab-llama-spm.gguf}
mkdir -p build/bench-models
model=build/bench-models/bert-base-$type.gguf
if [ ! -f "$model" ]; then
  "$bin" gen-model --arch bert --layers 12 --dim 768 --heads 12 --ffn 3072 --ctx 512 --vocab "$vocab" \
    --type f16 -o build/bench-models/bert-base-f16.gguf
  [ "$type" = f16 ] || "$bin" quantize build/bench-models/bert-base-f16.gguf "$model" "$type"
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d); model $model, $threads threads"
port=${PORT:-18133}
"$bin" serve -m "$model" --port "$port" -t "$threads" --max-seqs 32 --max-batched-tokens 4096 \
  >build/bench-encoder-server.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.5
done
python3 - "$port" <<'PY'
import json, random, sys, time, urllib.request
port = int(sys.argv[1])
rng = random.Random(1)
with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models") as r:
    model = json.load(r)["data"][0]["id"]
def post(inputs):
    body = json.dumps({"model": model, "input": inputs}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        out = json.load(r)
    assert len(out["data"]) == len(inputs)
def text():
    return [rng.randrange(300, 30000) for _ in range(128)]
post([text()])  # warm up
for batch, rounds in ((1, 32), (32, 4)):
    start = time.perf_counter()
    for _ in range(rounds):
        post([text() for _ in range(batch)])
    seconds = time.perf_counter() - start
    n = batch * rounds
    print(f"batch {batch:2d}: {n} embeddings of 128 tokens in {seconds:.2f} s: {n / seconds:.1f} embeddings/s, "
          f"{n * 128 / seconds:.0f} tokens/s")
PY
