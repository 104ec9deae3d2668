#!/usr/bin/env bash
# A random mixture-of-experts model (gen-model, llama with E experts, top-K) against the dense model
# of the same active parameter count (FFN width K times the expert width), both quantised alike, in
# one run: pagoda bench pp/tg, interleaved so drifting host bandwidth hits both alike, with the
# weight bytes a decode step reads (the bench's own count: k/E of the expert tensors). Markdown table.
#   bench/run_moe_comparison.sh [OUT_DIR]
#   env: TYPE=q4_k_m LAYERS=8 DIM=1024 HEADS=16 KV_HEADS=4 EXPERT_FFN=1536 EXPERTS=8 USED=2 PP=512 TG=128 REPS=2
# Takes minutes; not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/pagoda-moe-bench}
mkdir -p "$out"
bin=build/pagoda
type=${TYPE:-q4_k_m} layers=${LAYERS:-8} dim=${DIM:-1024} heads=${HEADS:-16} kvh=${KV_HEADS:-4}
ffn=${EXPERT_FFN:-1536} experts=${EXPERTS:-8} used=${USED:-2} pp=${PP:-512} tg=${TG:-128} reps=${REPS:-2}
shape=(--layers "$layers" --dim "$dim" --heads "$heads" --kv-heads "$kvh" --type f16 --vocab-size 32000)
moe=$out/moe-e${experts}k${used}-$type.gguf dense=$out/dense-ffn$((ffn * used))-$type.gguf
if [ ! -f "$moe" ]; then
  $bin gen-model -o "$out/moe-f16.gguf" "${shape[@]}" --arch llama --experts "$experts" --experts-used "$used" \
    --expert-ffn-dim "$ffn" >/dev/null
  $bin quantize "$out/moe-f16.gguf" "$moe" "$type" >/dev/null
  rm -f "$out/moe-f16.gguf"
fi
if [ ! -f "$dense" ]; then
  $bin gen-model -o "$out/dense-f16.gguf" "${shape[@]}" --ffn $((ffn * used)) >/dev/null
  $bin quantize "$out/dense-f16.gguf" "$dense" "$type" >/dev/null
  rm -f "$out/dense-f16.gguf"
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
echo "models: $layers layers, dim $dim, $heads heads ($kvh KV), vocab 32000, $type; MoE $experts experts of FFN $ffn, top $used; dense FFN $((ffn * used))"
echo "command: bench -p $pp -n $tg -r $reps --json --no-limits, alternating models"
echo
echo "| model | file MiB | weights read per decode step MiB | pp$pp tok/s | tg$tg tok/s |"
echo "| --- | ---: | ---: | ---: | ---: |"
field() { python3 -c "import json,sys; print(next(json.loads(l)['$2'] for l in sys.stdin if json.loads(l)['test']=='$1'))"; }
declare -A pps tgs bytes size
for round in 1 2; do
  for m in "$moe" "$dense"; do
    j=$($bin bench -m "$m" -p "$pp" -n "$tg" -r "$reps" --json --no-limits 2>/dev/null)
    pps[$m]="${pps[$m]:-} $(echo "$j" | field pp$pp tokens_per_s)"
    tgs[$m]="${tgs[$m]:-} $(echo "$j" | field tg$tg tokens_per_s)"
    bytes[$m]=$(echo "$j" | field tg$tg weight_bytes_per_token)
    size[$m]=$(echo "$j" | field tg$tg model_bytes)
  done
done
mean() { python3 -c "import sys; v=[float(x) for x in sys.argv[1:]]; print('%.1f' % (sum(v)/len(v)))" $1; }
for m in "$moe" "$dense"; do
  echo "| $(basename "$m" .gguf) | $(python3 -c "print('%.1f' % (${size[$m]}/1048576))") | $(python3 -c "print('%.1f' % (${bytes[$m]}/1048576))") | $(mean "${pps[$m]}") | $(mean "${tgs[$m]}") |"
done
