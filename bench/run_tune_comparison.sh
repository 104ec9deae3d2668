#!/usr/bin/env bash
# Tuned against default settings, for docs/benchmarks.md ("Tuned profiles"):
#  1. `pagoda tune` on `small` at Q4_0 and F16 for the workload below (mean prompt 80, output 68,
#     16 clients): the plan, threads, block size and scheduler knobs it
#     chooses, and how long it takes;
#  2. `pagoda bench-throughput` with mixed output lengths (32 requests, concurrency 16, prompts
#     32:128, outputs 8:128) under the default settings (--profile none) and under each tuned
#     profile, interleaved, ROUNDS rounds (default 1), each run with the load average before it
#     (the machine is shared: rerun when it is high).
#   bench/run_tune_comparison.sh [OUTDIR]   (default: build/bench-models; models made as run_model_benchmarks.sh does)
# Needs a built pagoda. About 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/pagoda
out=${1:-build/bench-models}
rounds=${ROUNDS:-1}
target=${TARGET_ITL_MS:-50}
vocab=../shared/vocab/ggml-vocab-llama-spm.gguf
vocab_arg=()
[ -f "$vocab" ] && vocab_arg=(--vocab "$vocab")
mkdir -p "$out"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
base="$out/small-f16.gguf"
[ -f "$base" ] || "$bin" gen-model --preset small --type f16 "${vocab_arg[@]}" -o "$base" >&2
[ -f "$out/small-q4_0.gguf" ] || "$bin" quantize "$base" "$out/small-q4_0.gguf" q4_0 >&2
load() { cut -d' ' -f1-3 /proc/loadavg; }
for type in q4_0 f16; do
  model="$out/small-$type.gguf"
  echo "### tune $type (load $(load)): $bin tune -m $model -o $out/small-$type.profile.json --target-itl-ms $target --prompt-len 80 --output-len 68 --concurrency 16"
  start=$(date +%s)
  "$bin" tune -m "$model" -o "$out/small-$type.profile.json" --target-itl-ms "$target" --prompt-len 80 --output-len 68 --concurrency 16 2>/dev/null
  echo "tune took $(( $(date +%s) - start )) s"
done
for round in $(seq 1 "$rounds"); do
  for type in q4_0 f16; do
    model="$out/small-$type.gguf"
    for setting in default tuned; do
      profile=none
      [ "$setting" = tuned ] && profile="$out/small-$type.profile.json"
      echo "### round $round, $type, $setting (load $(load)): $bin bench-throughput -m $model --requests 32 --concurrency 16 --output-len 8:128 --profile $profile"
      "$bin" bench-throughput -m "$model" --requests 32 --concurrency 16 --output-len 8:128 --profile "$profile" 2>/dev/null \
        | grep -E "output tokens/s|inter-token latency|time to first token|steps"
    done
  done
done
