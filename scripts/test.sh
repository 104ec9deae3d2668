#!/usr/bin/env bash
# Runs the whole test suite: builds (if needed) and runs every CTest test, then the bounded fuzz run.
# PAGODA_SANITIZE=1 builds into build-asan/ with AddressSanitizer + UBSan instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ "${PAGODA_SANITIZE:-0}" = 1 ]; then
  export PAGODA_BUILD_DIR=build-asan
  bash scripts/build.sh -DPAGODA_SANITIZE=ON
else
  export PAGODA_BUILD_DIR=build
  bash scripts/build.sh
fi
ctest --test-dir "$PAGODA_BUILD_DIR" --output-on-failure -j"$(nproc)"
if [ -f scripts/fuzz.sh ] && [ "${PAGODA_SKIP_FUZZ:-0}" != 1 ]; then
  bash scripts/fuzz.sh --smoke
fi
