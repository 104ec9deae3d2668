#!/usr/bin/env bash
# The lame-duck drain, repeated: two `pagoda serve` behind HAProxy (GET /readyz every 300 ms, down
# after one failure, retry-on 503 with redispatch, no preStop), SIGTERM to one mid-load, ROUNDS
# times with fresh servers (default 20; CTest's deploy_lame_duck runs 3). Prints each round's
# figures and exits non-zero if any request was lost. LAME_DUCK_BALANCER=nginx puts nginx in front
# instead (no health checks; `proxy_next_upstream error timeout http_503 non_idempotent`).
#   [LAME_DUCK_BALANCER=nginx] scripts/lame_duck_drain.sh [ROUNDS] [PATH/TO/pagoda]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rounds="${1:-20}"
binary="${2:-$root/build/pagoda}"
mode=lame_duck
if [ "${LAME_DUCK_BALANCER:-haproxy}" = nginx ]; then mode=lame_duck_nginx; fi
LAME_DUCK_ROUNDS="$rounds" exec bash "$root/tests/e2e/node/deploy/run.sh" "$mode" "$binary"
