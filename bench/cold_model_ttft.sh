#!/usr/bin/env bash
# Time to first token for a model loaded on its first request (several-model mode: `serve -m ID=PATH`
# loads nothing at start) against the same model warm: bench/cold_model_ttft.sh PATH/TO/pagoda [RUNS]
# Writes a random 24.4 M-parameter F32 model (97.6 MB) and the tiny preset, then for each, RUNS
# times: start a server, time one streamed completion (cold: load + prefill + first token), then
# five more (warm, median). Prints one line per run.
set -euo pipefail
pagoda="${1:?usage: cold_model_ttft.sh PATH/TO/pagoda [RUNS]}"
runs="${2:-5}"
bench="$(cd "$(dirname "$0")" && pwd)"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$pagoda" gen-model --preset tiny -o "$dir/big.gguf" --seed 31 --layers 4 --dim 768 --heads 8 --kv-heads 8 --ffn 1536 >/dev/null 2>&1
"$pagoda" gen-model --preset tiny -o "$dir/tiny.gguf" --seed 21 >/dev/null 2>&1
cat > "$dir/ttft.py" <<'PY'
import statistics, sys
from stream_ttft import ttft as ttft_of
port = int(sys.argv[1])
ttft = lambda: ttft_of(port, "m")
cold = ttft()
warm = statistics.median(ttft() for _ in range(5))
print(f"cold {cold*1000:.0f} ms, warm median {warm*1000:.0f} ms")
PY
for model in big tiny; do
  for _ in $(seq "$runs"); do
    "$pagoda" serve -m "m=$dir/$model.gguf" --port 0 -t 2 --drain-grace 0 2>"$dir/log" & pid=$!
    until port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$dir/log" | grep -o '[0-9]*$'); do sleep 0.05; done
    echo "$model: $(PYTHONPATH="$bench" python3 "$dir/ttft.py" "$port"); load $(grep -o 'loaded from .* in [0-9.]* s' "$dir/log" | grep -o '[0-9.]* s$')"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
