#!/usr/bin/env bash
# Everything issue 12 still needs from an AMX host (Sapphire Rapids or later), in one run:
#  1. the hardware variants of the AMX tests (int8 tiles against the VNNI panels bit for bit, bf16
#     tiles against the instruction's documented arithmetic bit for bit, PAGODA_AMX end to end, the
#     tuned threshold, the amx_bf16 attention method against its references, batch invariant, and
#     bit for bit its emulation's) — they skip elsewhere, so this script fails if any of them skipped;
#  2. pp512 / tg128 for `small` and `tinyllama` in Q4_0, Q8_0, Q4_K_M with the AMX int8 tiles
#     (PAGODA_AMX=1) and without (PAGODA_AMX=0), and in F16 under amx_bf16, bf16_dot and f32_fma,
#     interleaved, each with the ratio to the peak of the path it took (bench prints the AMX peaks);
#  3. `pagoda tune` on small Q4_0 and F16 (the threshold, the float method, the knobs it picks);
#  4. where build/bench/pagoda_bench is built (-DPAGODA_BENCH=ON), the kernels alone: one 2048 x 768
#     matmul at 512 tokens on one thread pinned to one core, the AMX int8 tiles against the VNNI
#     panels per quantised type and the F16 methods at 64 and 512 tokens, two turns each, so a
#     kernel change shows without the rest of a model step.
#   bench/run_amx_checks.sh [OUTDIR]   (default build/amx-checks; models as run_model_benchmarks.sh)
# Needs build/pagoda and build/tests/pagoda_tests. Roughly 20-30 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/amx-checks}
bin=build/pagoda
mkdir -p "$out"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
flags=$(grep -o -w 'amx_tile\|amx_int8\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "AMX flags: ${flags:-none}"
if [ -z "$flags" ]; then
  echo "this host has no AMX: nothing here can be measured (see docs/benchmarks.md for the other hosts)" >&2
  exit 1
fi

echo "### 1. hardware tests"
filter='AmxMatmul.Hardware*:AmxBf16Matmul.Hardware*:AmxAttention.Hardware*:AmxEnv.*:TuneAmx.*'
build/tests/pagoda_tests --gtest_filter="$filter" 2>&1 | tee "$out/hardware-tests.log" | grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|PASSED|FAILED' || true
if grep -q '^\[  SKIPPED \]' "$out/hardware-tests.log"; then
  echo "some hardware tests skipped: the OS refused the tiles, or a CPUID bit is missing" >&2
  exit 1
fi
grep -q '^\[  FAILED  \]' "$out/hardware-tests.log" && { echo "hardware tests FAILED" >&2; exit 1; }

echo "### 2. pp512 / tg128"
vocab=../shared/vocab/ggml-vocab-llama-spm.gguf
vocab_arg=()
[ -f "$vocab" ] && vocab_arg=(--vocab "$vocab")
for preset in small tinyllama; do
  base="$out/$preset-f16.gguf"
  [ -f "$base" ] || "$bin" gen-model --preset "$preset" --type f16 "${vocab_arg[@]}" -o "$base" >&2
  for type in q4_0 q8_0 q4_k_m; do
    model="$out/$preset-$type.gguf"
    [ -f "$model" ] || "$bin" quantize "$base" "$model" "$type" >&2
    for amx in 1 0; do
      echo "#### $preset $type PAGODA_AMX=$amx: $bin bench -m $model -p 512 -n 128 -r 3"
      PAGODA_AMX=$amx "$bin" bench -m "$model" -p 512 -n 128 -r 3 2>/dev/null | grep -E '^\| (pp|tg)|^machine'
    done
  done
  for method in amx_bf16 bf16_dot f32_fma; do
    echo "#### $preset f16 PAGODA_FLOAT_METHOD=$method: $bin bench -m $base -p 512 -n 128 -r 3"
    PAGODA_FLOAT_METHOD=$method "$bin" bench -m "$base" -p 512 -n 128 -r 3 2>&1 | grep -E '^\| (pp|tg)|f16/bf16 weights'
  done
done

echo "### 3. pagoda tune"
for type in q4_0 f16; do
  model="$out/small-$type.gguf"
  echo "#### tune $model"
  "$bin" tune -m "$model" -o "$out/small-$type.profile.json" --target-itl-ms 50 --prompt-len 80 --output-len 68 \
    --concurrency 16 2>/dev/null | tail -3
  python3 - "$out/small-$type.profile.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
m = j["measurements"]
print("machine limits:", json.dumps(m["machine_limits"]))
for t, v in m.get("matmul", {}).items():
    print(f"{t}: chosen {v['chosen']};", {k: x["relative_score"] for k, x in v["methods"].items()})
print("amx:", json.dumps(m.get("amx")))
EOF
done

bench=build/bench/pagoda_bench
if [ ! -x "$bench" ]; then
  echo "### 4. skipped: $bench not built (configure with -DPAGODA_BENCH=ON)"
  exit 0
fi
echo "### 4. kernels alone: GFLOP/s of one 2048 x 768 matmul, one thread on core 0"
for turn in 1 2; do
  for amx in 1 0; do
    echo -n "turn $turn PAGODA_AMX=$amx, 512 tokens (Q8_0 Q4_0 Q4_K Q6_K):"
    PAGODA_AMX=$amx PAGODA_BENCH_THREADS=1 taskset -c 0 "$bench" --benchmark_min_time=0.3 \
      --benchmark_filter='BM_packed_small_ffn_(Q8_0|Q4_0|Q4_K|Q6_K)/512/' 2>/dev/null | grep -o 'GFLOP/s=[0-9.k]*' | tr '\n' ' '
    echo
  done
  for method in amx_bf16 bf16_dot f32_fma; do
    echo -n "turn $turn F16 $method, 64 and 512 tokens:"
    PAGODA_FLOAT_METHOD=$method PAGODA_BENCH_THREADS=1 taskset -c 0 "$bench" --benchmark_min_time=0.3 \
      --benchmark_filter='BM_packed_small_ffn_F16/(64|512)/' 2>/dev/null | grep -o 'GFLOP/s=[0-9.k]*' | tr '\n' ' '
    echo
  done
done
