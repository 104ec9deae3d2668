#!/usr/bin/env bash
# The Vulkan backend on this machine's device (lavapipe in CI; a GPU where there is one), in one
# short run: the device's limits, every Vulkan test (under the validation layer), then prefill and
# decode speed (pp512 / tg128) of the fixture model and of random models written by gen-model, all on
# the device, all on the cpu, and tg128 with half the layers offloaded (-ngl, a partial offload).
# The Vulkan* tests include VulkanNativeWeights (native quantised layouts bitwise equal to the grouped
# one), VulkanMemory (free memory through VK_EXT_memory_budget, which lavapipe lacks: a GPU runs it),
# VulkanFusion (the fused ops: dispatches and host ms per decode step, fused and unfused) and
# VulkanSplitAttention (split-KV decode attention against the unsplit shader and the reference).
# Usage: scripts/vulkan_check.sh [build dir]   (default: build/)
# Figures from lavapipe are not GPU figures: lavapipe runs the shaders on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PAGODA="$BUILD/pagoda"
echo "== devices"
"$PAGODA" devices
echo "== Vulkan tests"
"$BUILD/tests/pagoda_tests" --gtest_filter='Devices/Conformance.*:Devices/Contract.*:Devices/MoeFfn.*:MoeFfnOptions.*:MoeFfnReads.*:AttentionSinks.*:Vulkan*:Goldens/Stories260K.*vulkan*:Architectures/VulkanModel.*:*PartialOffload*:*LayerSplit*:CommandLine.GpuLayers*'
echo "== Vulkan device suites at other kernel sizes (specialisation constants), shared-memory reductions, split-KV from 128 keys"
PAGODA_VULKAN_GEMV_WORKGROUP=256 PAGODA_VULKAN_GEMM_STAGE=8 PAGODA_VULKAN_SUBGROUP_REDUCE=0 PAGODA_VULKAN_SPLIT_KEYS=64 \
  "$BUILD/tests/pagoda_tests" \
  --gtest_filter='Devices/Conformance.*:Devices/MoeFfn.*:Architectures/VulkanModel.*:VulkanNativeWeights.*:VulkanCodebookWeights.*:VulkanMoeRouter.*'
echo "== speed"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
models=(../shared/models/stories260K.gguf)
if [ "${PAGODA_VULKAN_BIG:-0}" = 1 ]; then  # small (~134M) and tinyllama (~1.1B): a GPU's run, not lavapipe's
  for preset in small tinyllama; do
    "$PAGODA" gen-model --preset "$preset" --type f16 -o "$TMP/$preset-f16.gguf"
    models+=("$TMP/$preset-f16.gguf")
    for q in q8_0 q4_0 iq4_xs; do
      "$PAGODA" quantize "$TMP/$preset-f16.gguf" "$TMP/$preset-$q.gguf" "$q" && models+=("$TMP/$preset-$q.gguf")
    done
  done
fi
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "skipping $m (missing)"; continue; }
  for backend in vulkan cpu; do
    echo "-- $m on $backend"
    "$PAGODA" bench -m "$m" --backend "$backend" -p 512 -n 128 -r 2 --no-limits
  done
  echo "-- $m on vulkan, unfused (PAGODA_FUSION=0)"
  PAGODA_FUSION=0 "$PAGODA" bench -m "$m" --backend vulkan -p 0 -n 128 -r 2 --no-limits
  case "$m" in *-q*.gguf|*-iq*.gguf)  # the grouped layout (int8 codes + per-16 scales) against the file's own blocks
    echo "-- $m on vulkan, PAGODA_VULKAN_WEIGHTS=grouped"
    PAGODA_VULKAN_WEIGHTS=grouped "$PAGODA" bench -m "$m" --backend vulkan -p 512 -n 128 -r 2 --no-limits ;;
  esac
  layers=$("$PAGODA" gguf-info "$m" | awk '$1 ~ /\.block_count$/ {print $3; exit}')
  echo "-- $m on vulkan, $((layers / 2)) of $layers layers (-ngl), the rest on cpu"
  "$PAGODA" bench -m "$m" --backend vulkan -ngl $((layers / 2)) -p 0 -n 128 -r 2 --no-limits
done
