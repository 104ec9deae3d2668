#!/usr/bin/env bash
# The model-level suites under one kernel-path override: llama2.c's goldens on stories260K, every
# model family against the reference backend, batch invariance, backend conformance and the fused
# graph's twins, run with SETTING (e.g. PAGODA_ISA=avx2) in the environment. The unit suites pin
# their own paths; this checks that whole models still give the reference answers on each path the
# CPU can take. A path this CPU (or its OS) cannot run exits 77 (CTest: skipped) and says why.
#   tests/kernel_paths.sh SETTING PAGODA_TESTS_BINARY PAGODA_BINARY
set -euo pipefail
setting=$1 tests=$2 pagoda=$3
name=${setting%%=*} value=${setting#*=}

info=$("$pagoda" cpu-info)
field() { sed -n "s/^$1: //p" <<<"$info"; }
features=" $(field features) " best=$(field 'best path')
for f in features 'best path' 'amx int8' 'amx bf16'; do  # a renamed line must fail here, not skip
  [ -n "$(field "$f")" ] || { echo "kernel_paths.sh: 'pagoda cpu-info' printed no '$f:' line" >&2; exit 2; }
done
skip() { echo "SKIP: $setting needs $1; this host: $2"; exit 77; }
needs_isa() {  # scalar < avx2 < avx512
  local rank=(scalar avx2 avx512) want=-1 have=-1 i
  for i in 0 1 2; do [ "${rank[$i]}" = "$1" ] && want=$i; [ "${rank[$i]}" = "$best" ] && have=$i; done
  [ "$have" -ge "$want" ] || skip "the $1 path" "best path $best"
}
needs_amx() {  # $1: int8 or bf16
  local status
  status=$(field "amx $1")
  [ "$status" = available ] || skip "AMX $1 tiles" "$status"
}
case "$setting" in
  PAGODA_ISA=*) needs_isa "$value" ;;
  PAGODA_FLOAT_METHOD=bf16_dot)
    needs_isa avx512
    [[ $features == *" AVX512_BF16 "* ]] || skip "AVX512_BF16" "features$features" ;;
  PAGODA_FLOAT_METHOD=amx_bf16 | PAGODA_ATTENTION=amx_bf16) needs_isa avx512; needs_amx bf16 ;;
  PAGODA_AMX=1) needs_amx int8 ;;
  PAGODA_AMX=0 | PAGODA_FLOAT_METHOD=f32_fma | PAGODA_QUANT_METHOD=dequant_fma | PAGODA_FUSION=0 | PAGODA_DECODE_PREFETCH=1 | PAGODA_WEIGHT_PREFETCH=l1) ;;
  *) echo "kernel_paths.sh: no rule for '$setting' (add its host requirement here)" >&2; exit 2 ;;
esac

suites='Goldens/*:ReferenceGolden.*:Stories260K/*:RandomModels/*:BatchInvariance.*:Backends/*:Fusion/*'
suites+=':Types/*:QuantizedModel.*:Models/*'
# Less the Vulkan backend's goldens: these settings steer CPU kernels, and lavapipe is slow.
suites+='-*_vulkan'
echo "running the model-level suites with $name=$value"
export "$name=$value"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
"$tests" --gtest_filter="$suites" --gtest_color=no >"$out" 2>&1 || rc=$?
# Each failed test's lines, then every skip inside the run as "SKIP: TEST: REASON" (the line after
# gtest's "FILE:LINE: Skipped"), which scripts/check-tests.py judges like a skipped CTest test.
awk '/^\[ RUN      \]/ { buf = "" } { buf = buf $0 "\n" } /^\[  FAILED  \] [^ ]+ \(/ { printf "%s", buf }' "$out"
awk '/: Skipped$/ { getline reason; next_reason = reason }
     /^\[  SKIPPED \] [^ ]+ \(/ { print "SKIP: " $4 ": " next_reason; next_reason = "" }' "$out"
grep -E '^\[(==========|  PASSED  |  SKIPPED |  FAILED  )\] [0-9]+ tests?' "$out" || true
if [ "$rc" != 0 ]; then tail -n 20 "$out"; exit "$rc"; fi
# A renamed suite would leave the filter matching nothing, and gtest passes an empty run; skipped
# tests did not run.
ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran\..*/\1/p' "$out")
skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?, listed below:.*/\1/p' "$out")
if [ $(( ${ran:-0} - ${skipped:-0} )) -lt 100 ]; then
  echo "kernel_paths.sh: only $(( ${ran:-0} - ${skipped:-0} )) of the model-level suites' tests ran (${skipped:-0} skipped; expected over 100)" >&2
  exit 1
fi
