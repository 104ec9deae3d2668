#!/usr/bin/env bash
# Issue 12's model figures under `pagoda tune`'s choices, run as a user would: for each GGUF in
# MODEL_DIR, `pagoda tune -m M -o M.profile.json` (how long it took and what it chose), then
# `pagoda bench -m M --profile M.profile.json -p 512 -n 128 -r 3`: pp512 and tg128, each with its
# share of the limit of the path it took (bench prints it: the tile or dot-product peak for prefill,
# the streaming-read bound measured in the same run for decode). Models: `pagoda gen-model --preset
# small|tinyllama` and `pagoda quantize` (as bench/run_model_benchmarks.sh makes them).
#   bench/run_tuned_models.sh MODEL_DIR [BINARY]   (FRESH=1: tune again where a profile exists)
# About 2-4 minutes per model on 2 cores (tune 40-160 s, bench 1 minute).
set -euo pipefail
dir=${1:?usage: bench/run_tuned_models.sh MODEL_DIR [BINARY]}
bin=${2:-build/pagoda}
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(date -u '+%F %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" cpu-info | grep -v '^default threads'
for model in "$dir"/*.gguf; do
  profile=${model%.gguf}.profile.json
  echo "== $(basename "$model")"
  if [ "${FRESH:-0}" = 1 ] || [ ! -f "$profile" ]; then
    start=$(date +%s)
    "$bin" tune -m "$model" -o "$profile" > "$profile.log" 2>&1 || { tail -5 "$profile.log"; exit 1; }
    echo "tune: $(( $(date +%s) - start )) s (log: $profile.log)"
  fi
  python3 - "$profile" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
plan = "; ".join(f"{e['type']}: {e.get('method', '?')}" + (f", AMX from {e['amx_min_tokens']}" if 'amx_min_tokens' in e else "")
                 for e in p.get("kernel_plan", []))
knobs = p.get("scheduler", {})
print(f"profile: {plan}; attention {p.get('attention', 'simd (not measured)')}; decode KV prefetch {p.get('decode_kv_prefetch', 'off (not measured)')}; threads {p.get('threads', '?')}; "
      f"KV blocks {p.get('kv_block_size', '?')}; scheduler {json.dumps(knobs, sort_keys=True)}")
PY
  "$bin" bench -m "$model" --profile "$profile" -p 512 -n 128 -r 3 2>&1 | grep -E '^\| (pp|tg)|stolen'
done
