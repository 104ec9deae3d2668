#!/usr/bin/env bash
# Runs the timing-sensitive tests many times beside a CPU hog and reports every failure: what to run
# before resolving an issue that touches the engine loop, the server or the draft cost model
# (docs/reliability.md keeps the results).
#   scripts/stress-tests.sh [--runs N] [--hogs N] [--build DIR] [--tests BIN] [--only NAME]
# Defaults: 20 runs of each test, one busy-loop hog per CPU (nproc), build/ (and its
# tests/pagoda_tests; --tests names another gtest binary of the suite). --only runs the one
# test of that name (a gtest name, or a CTest name such as deploy_fleet). The hogs are plain shell
# busy loops at normal priority, started here and ended here. Logs of failed runs go to
# DIR/stress/NAME.RUN.log. Exit status: 0 when every run of every test passed, else 1.
set -euo pipefail
cd "$(dirname "$0")/.."

# The tests whose verdict depends on time: gtest names (one process each run) and CTest names.
GTESTS=(
  DraftModelEngine.CostModelBacksOffADearDraft
  DraftModelEngine.NoProbesWhereCostsAloneForbidDrafting
  DraftModelEngine.OneScoutMeasuresBeforeTheOthersCatchUp
  ServeHostile.ShutdownDuringALongStep
)
CTESTS=(deploy_fleet deploy_manifests)

runs=20 hogs=$(nproc) build=build only="" tests_bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="${2:?--runs needs a number}"; shift 2 ;;
    --hogs) hogs="${2:?--hogs needs a number}"; shift 2 ;;
    --build) build="${2:?--build needs a folder}"; shift 2 ;;
    --only) only="${2:?--only needs a test name}"; shift 2 ;;
    --tests) tests_bin="${2:?--tests needs a binary}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | cut -c3-; exit 0 ;;
    *) echo "stress-tests: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "stress-tests: --runs must be a positive integer, got '$runs'" >&2; exit 2; }
[[ "$hogs" =~ ^[0-9]+$ ]] || { echo "stress-tests: --hogs must be a number, got '$hogs'" >&2; exit 2; }
tests_bin="${tests_bin:-$build/tests/pagoda_tests}"
need_gtests=1
if [ -n "$only" ]; then
  found=0 need_gtests=0
  for t in "${GTESTS[@]}"; do [ "$t" = "$only" ] && found=1 need_gtests=1; done
  for t in "${CTESTS[@]}"; do [ "$t" = "$only" ] && found=1; done
  [ $found = 1 ] || { echo "stress-tests: '$only' is not one of: ${GTESTS[*]} ${CTESTS[*]}" >&2; exit 2; }
fi
[ $need_gtests = 0 ] || [ -x "$tests_bin" ] || { echo "stress-tests: no $tests_bin (build with scripts/build.sh)" >&2; exit 1; }
logs="$build/stress"
mkdir -p "$logs"

hog_pids=()
stop_hogs() { for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT
for _ in $(seq 1 "$hogs"); do
  ( while :; do :; done ) &
  hog_pids+=($!)
done
echo "stress-tests: $runs runs of each test beside $hogs busy loop(s) on $(nproc) CPU(s); load now $(cut -d' ' -f1-3 /proc/loadavg)"

failed_any=0
summary=()
one() {  # NAME KIND: runs it $runs times, one line per run, a summary line
  local name=$1 kind=$2 passed=0 i log start ms rc
  for i in $(seq 1 "$runs"); do
    log="$logs/$name.$i.log"
    start=$(date +%s%N)
    if [ "$kind" = gtest ]; then
      "$tests_bin" --gtest_filter="$name" >"$log" 2>&1 && rc=0 || rc=$?
      if grep -q '^\[  SKIPPED \]' "$log"; then rc=77; fi
      if ! grep -q '^\[       OK \]' "$log"; then [ "$rc" != 0 ] || rc=1; fi  # the filter matched nothing
    else
      ctest --test-dir "$build" -R "^$name\$" --output-on-failure >"$log" 2>&1 && rc=0 || rc=$?
      if grep -q '\*\*\*Skipped\|Not Run' "$log"; then rc=77; fi  # a skip proves nothing here
    fi
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [ "$rc" = 0 ]; then
      passed=$((passed + 1)); rm -f "$log"
      printf '  %s run %d: passed (%d ms)\n' "$name" "$i" "$ms"
    else
      printf '  %s run %d: FAILED (exit %s, %d ms; log %s)\n' "$name" "$i" "$rc" "$ms" "$log"
      grep -E "Failure|Expected|Which is|error|FAIL|assert" "$log" | head -n 8 | sed 's/^/      /'
    fi
  done
  summary+=("$name: $passed/$runs passed")
  [ "$passed" = "$runs" ] || failed_any=1
}
for t in "${GTESTS[@]}"; do [ -z "$only" ] || [ "$t" = "$only" ] && one "$t" gtest; done
for t in "${CTESTS[@]}"; do [ -z "$only" ] || [ "$t" = "$only" ] && one "$t" ctest; done
echo
echo "stress-tests: $(date -u +%FT%TZ), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs, $hogs hog(s), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %s\n' "${summary[@]}"
exit "$failed_any"
