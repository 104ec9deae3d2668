#!/usr/bin/env bash
# Runs the whole test suite: installs the test stack (scripts/install-deps.sh: test servers, a
# browser, Node.js and the npm packages), builds if needed, runs every CTest test, then the bounded
# fuzz run, and ends with one line: "N passed, N failed[, N skipped]".
# Strict mode (CI set, as CI does, or PAGODA_STRICT=1): a missing ../shared, a failed npm ci or any
# skipped test whose reason is not on tests/skip_allowlist.txt (hardware this host lacks) fails the
# run; scripts/check-tests.py prints every skip with its reason either way.
# PAGODA_SANITIZE=1 builds into build-asan/ with AddressSanitizer + UBSan instead.
set -euo pipefail
cd "$(dirname "$0")/.."
strict=0
if { [ -n "${CI:-}" ] && [ "${CI}" != false ] && [ "${CI}" != 0 ]; } || [ "${PAGODA_STRICT:-0}" = 1 ]; then strict=1; fi
PAGODA_DEPS=all bash scripts/install-deps.sh

fixtures="${PAGODA_FIXTURES:-../shared}"
if [ ! -f "$fixtures/models/stories260K.gguf" ]; then
  msg="the shared fixtures are missing: no $fixtures/models/stories260K.gguf (put the fixtures folder at ../shared beside the repository, or set PAGODA_FIXTURES to it)"
  if [ $strict = 1 ]; then echo "pagoda: $msg" >&2; exit 1; fi
  echo "pagoda: $msg; the goldens, tokenizer vectors and CLI tests will be skipped" >&2
fi

if [ "${PAGODA_SANITIZE:-0}" = 1 ]; then
  export PAGODA_BUILD_DIR=build-asan
  # Without the Vulkan backend: Mesa's lavapipe leaks 128 bytes per process inside its driver (a
  # bare create/destroy of an instance and device reports it too), and LSan cannot suppress it by
  # name because the loader unloads the driver first; it would fail every test, discovery included.
  bash scripts/build.sh -DPAGODA_SANITIZE=ON -DPAGODA_VULKAN=OFF
else
  export PAGODA_BUILD_DIR=build
  bash scripts/build.sh
fi
junit="$PAGODA_BUILD_DIR/ctest-junit.xml"
rm -f "$junit"
# The JUnit report keeps each test's output (1 MiB at most) for the skip reasons.
ctest_rc=0
ctest --test-dir "$PAGODA_BUILD_DIR" --output-on-failure -j"$(nproc)" --output-junit "$(realpath "$junit")" \
  --test-output-size-passed 1048576 --test-output-size-failed 1048576 || ctest_rc=$?

extra=()
if [ "${PAGODA_SKIP_FUZZ:-0}" = 1 ]; then
  extra+=(--extra "fuzz_smoke=skipped:PAGODA_SKIP_FUZZ=1")
elif bash scripts/fuzz.sh --smoke; then
  extra+=(--extra "fuzz_smoke=passed")
else
  extra+=(--extra "fuzz_smoke=failed")
fi

strict_arg=()
[ $strict = 1 ] && strict_arg=(--strict)
check_rc=0
python3 scripts/check-tests.py --junit "$junit" --allowlist tests/skip_allowlist.txt "${strict_arg[@]}" "${extra[@]}" || check_rc=$?
# CTest failing without a failed test in its report (a crash of CTest itself) still fails the run.
[ "$check_rc" = 0 ] && [ "$ctest_rc" = 0 ]
