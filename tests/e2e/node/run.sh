#!/usr/bin/env bash
# Runs the Node end-to-end suite against a built pagoda binary: run.sh PATH/TO/pagoda
# Exits 77 (CTest: skipped) with a message when node or the npm packages are missing; install them
# with `npm ci` in this folder (scripts/install-deps.sh does it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
binary="${1:?usage: run.sh PATH/TO/pagoda}"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (scripts/install-deps.sh installs it)"; exit 77
fi
if [ ! -d "$here/node_modules/openai" ] || [ ! -d "$here/node_modules/ws" ] || [ ! -d "$here/node_modules/@anthropic-ai/sdk" ]; then
  echo "SKIP: npm packages missing; run: (cd tests/e2e/node && npm ci)"; exit 77
fi
export PAGODA_BINARY="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
# Files the tests keep for people to look at (the dashboard's screenshot), beside the binary.
export PAGODA_ARTIFACT_DIR="${PAGODA_ARTIFACT_DIR:-$(dirname "$PAGODA_BINARY")/test-artifacts}"
cd "$here"
exec node --test --test-concurrency=1 --test-timeout=120000 tests/
