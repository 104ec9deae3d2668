#!/usr/bin/env bash
# Quantisation accuracy table of docs/benchmarks.md: each type with plain min/max scales, pagoda's
# clipping search, and search + calibration, measured with `pagoda perplexity --kl-base` against the
# unquantised base on tests/data/eval/tinystories_eval.txt (calibration uses a different text).
#   bench/run_accuracy.sh [BASE.gguf] [OUTDIR]      (default: ../shared/models/stories260K.gguf build/accuracy)
# Environment: TYPES (default "q8_0 int8 q4_0 int4-g32 int4-g128"), CTX (128), PAGODA_BIN (build/pagoda).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-../shared/models/stories260K.gguf}
out=${2:-build/accuracy}
bin=${PAGODA_BIN:-build/pagoda}
eval_text=tests/data/eval/tinystories_eval.txt
calib_text=tests/data/eval/tinystories_calib.txt
mkdir -p "$out"
echo "base: $base; $($bin perplexity -m "$base" -f "$eval_text" --ctx "${CTX:-128}" 2>/dev/null | grep '^perplexity')"
echo "| type | scales | size | perplexity | mean KL (base ‖ q) | top-1 agreement |"
echo "| --- | --- | ---: | --- | --- | ---: |"
for type in ${TYPES:-q8_0 int8 q4_0 int4-g32 int4-g128}; do
  for mode in plain search calib; do
    model="$out/$type-$mode.gguf"
    case $mode in
      plain) flags=(--plain-minmax) ;;
      search) flags=() ;;
      calib) flags=(--calib "$calib_text") ;;
    esac
    # A type without a clipping search refuses --plain-minmax (quantize says which): no plain row.
    if ! err=$("$bin" quantize "$base" "$model" "$type" "${flags[@]}" 2>&1 > /dev/null); then
      [ "$mode" = plain ] && [[ $err == *"has no clipping search"* ]] && continue
      echo "$err" >&2; exit 1
    fi
    r=$("$bin" perplexity -m "$model" -f "$eval_text" --ctx "${CTX:-128}" --kl-base "$base" 2>/dev/null)
    ppl=$(sed -n 's/^perplexity: //p' <<< "$r")
    kl=$(sed -n 's/^mean KL divergence (base || model): //p' <<< "$r")
    top1=$(sed -n 's/^top-1 agreement: //p' <<< "$r")
    size=$(stat -c %s "$model")
    printf '| %s | %s | %.2f MiB | %s | %s | %s |\n' "$type" "$mode" "$(awk -v s="$size" 'BEGIN { print s / 1048576 }')" "$ppl" "$kl" "$top1"
  done
done
