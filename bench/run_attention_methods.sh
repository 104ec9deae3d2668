#!/usr/bin/env bash
# The attention methods side by side on whole models (docs/benchmarks.md, "AMX bf16 attention"):
# for each model, pp512, pp2048 and tg128 after a 1024-token context, under PAGODA_ATTENTION=simd and
# =amx_bf16, alternating run by run (bench/ab_bench.py). F16 models run their matmuls on the AMX bf16
# tiles on both sides (PAGODA_FLOAT_METHOD=amx_bf16, what `pagoda tune` chooses on AMX hosts), so the
# attention is the only difference. Needs an AMX host (the amx_bf16 side otherwise runs simd too: the
# labels of `pagoda bench` say which). About 2 minutes per model at ROUNDS=2.
#   bench/run_attention_methods.sh MODEL_DIR [ROUNDS] [BINARY]
#   (MODEL_DIR: GGUF files, e.g. from `pagoda gen-model --preset tinyllama` and `pagoda quantize`)
set -euo pipefail
dir=${1:?usage: bench/run_attention_methods.sh MODEL_DIR [ROUNDS] [BINARY]}
rounds=${2:-2}
bin=${3:-build/pagoda}
here=$(cd "$(dirname "$0")" && pwd)
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(date -u +%FT%TZ)"
for model in "$dir"/*.gguf; do
    env=""
    case "$model" in *f16*) env="PAGODA_FLOAT_METHOD=amx_bf16," ;; esac
    echo "== $(basename "$model")"
    python3 "$here/ab_bench.py" "${env}PAGODA_ATTENTION=simd@$bin" "${env}PAGODA_ATTENTION=amx_bf16@$bin" "$model" "$rounds" -p 512 -n 0 -r 2
    python3 "$here/ab_bench.py" "${env}PAGODA_ATTENTION=simd@$bin" "${env}PAGODA_ATTENTION=amx_bf16@$bin" "$model" "$rounds" -p 2048 -n 0 -r 1
    python3 "$here/ab_bench.py" "${env}PAGODA_ATTENTION=simd@$bin" "${env}PAGODA_ATTENTION=amx_bf16@$bin" "$model" "$rounds" -p 0 -n 128 -d 1024 -r 1
done
