#!/usr/bin/env bash
# Generates the `small` and `tinyllama` random-weight models, quantises them, and runs
# `pagoda bench` on each (pp512 / tg128 by default); the JSON lines go to OUTDIR/results.jsonl and
# bench/bench_table.py prints them as the markdown table of docs/benchmarks.md.
#   bench/run_model_benchmarks.sh [OUTDIR] [PRESETS...]      (default: build/bench-models small tinyllama)
# Environment: TYPES (default "f16 q8_0 q4_0 int4-g32"), PP (512), TG (128), REPS (3), THREADS (physical cores).
# Takes several minutes per preset; not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/bench-models}
shift || true
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(small tinyllama)
types=${TYPES:-"f16 q8_0 q4_0 int4-g32"}
bin=build/pagoda
vocab=../shared/vocab/ggml-vocab-llama-spm.gguf
vocab_arg=()
[ -f "$vocab" ] && vocab_arg=(--vocab "$vocab")
threads_arg=()
[ -n "${THREADS:-}" ] && threads_arg=(-t "$THREADS")
mkdir -p "$out"
results="$out/results.jsonl"
: > "$results"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
for preset in "${presets[@]}"; do
  base="$out/$preset-f16.gguf"
  [ -f "$base" ] || "$bin" gen-model --preset "$preset" --type f16 "${vocab_arg[@]}" -o "$base" >&2
  for type in $types; do
    model="$out/$preset-$type.gguf"
    if [ "$type" != f16 ] && [ ! -f "$model" ]; then "$bin" quantize "$base" "$model" "$type" >&2; fi
    echo "### $preset $type: $bin bench -m $model -p ${PP:-512} -n ${TG:-128} -r ${REPS:-3}"
    "$bin" bench -m "$model" -p "${PP:-512}" -n "${TG:-128}" -r "${REPS:-3}" "${threads_arg[@]}" --json | tee -a "$results"
  done
done
python3 bench/bench_table.py "$results"
