#!/usr/bin/env bash
# Time to first token for a cold LoRA adapter against a warm one: bench/cold_lora_ttft.sh PATH/TO/pagoda [RUNS]
# Writes a random 24.4 M-parameter F32 base (97.6 MB) with two rank-16 adapters on all its
# projections (gen-model --lora-out), then for each of RUNS servers times streamed completions
# (4-token prompt, first token only):
#   evicted: `serve --lora a=A --lora b=B --max-loras 1`; requests alternate a, b, a, ... so each
#            reads its adapter again from disk (the other one was dropped); against the median of
#            five requests in a row on one adapter (warm).
#   runtime: `serve --allow-runtime-lora`; POST /v1/load_lora_adapter (timed), then the first
#            request on it (cold: its first step under the adapter), against the next five (warm).
# Prints one line per server.
set -euo pipefail
pagoda="${1:?usage: cold_lora_ttft.sh PATH/TO/pagoda [RUNS]}"
runs="${2:-5}"
bench="$(cd "$(dirname "$0")" && pwd)"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gen=(--preset tiny --layers 4 --dim 768 --heads 8 --kv-heads 8 --ffn 1536 --lora-rank 16)
"$pagoda" gen-model "${gen[@]}" -o "$dir/base.gguf" --seed 31 --lora-out "$dir/a.gguf" --lora-seed 1 >/dev/null 2>&1
"$pagoda" gen-model "${gen[@]}" -o "$dir/base2.gguf" --seed 31 --lora-out "$dir/b.gguf" --lora-seed 2 >/dev/null 2>&1
cat > "$dir/ttft.py" <<'PY'
import http.client, json, statistics, sys, time
from stream_ttft import ttft as ttft_of
port, mode = int(sys.argv[1]), sys.argv[2]
ttft = lambda model: ttft_of(port, model)
ms = lambda s: f"{s * 1000:.0f} ms"
if mode == "evicted":
    ttft("a")  # the first request (server warm-up) is not counted
    cold = [ttft(m) for m in ["b", "a", "b", "a", "b", "a"]]
    warm = statistics.median(ttft("a") for _ in range(5))
    print(f"evicted: cold median {ms(statistics.median(cold))} (min {ms(min(cold))}, max {ms(max(cold))}), warm median {ms(warm)}")
else:
    ttft("base")
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.perf_counter()
    c.request("POST", "/v1/load_lora_adapter", json.dumps({"lora_name": "a", "lora_path": sys.argv[3]}), {"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    load = time.perf_counter() - t0
    if r.status != 200: sys.exit(f"load failed: {r.status}")
    cold = ttft("a")
    warm = statistics.median(ttft("a") for _ in range(5))
    print(f"runtime: load call {ms(load)}, first request {ms(cold)}, warm median {ms(warm)}")
PY
serve() {  # serve ARGS...: starts a server, sets $pid and $port
  "$pagoda" serve -m "$dir/base.gguf" --model-name base --port 0 -t 2 --drain-grace 0 "$@" 2>"$dir/log" & pid=$!
  until port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$dir/log" | grep -o '[0-9]*$'); do sleep 0.05; done
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 0.05; done
}
for _ in $(seq "$runs"); do
  serve --lora "a=$dir/a.gguf" --lora "b=$dir/b.gguf" --max-loras 1
  PYTHONPATH="$bench" python3 "$dir/ttft.py" "$port" evicted
  kill "$pid"; wait "$pid" 2>/dev/null || true
  serve --allow-runtime-lora
  PYTHONPATH="$bench" python3 "$dir/ttft.py" "$port" runtime "$dir/a.gguf"
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
