#!/usr/bin/env bash
# Runs one of the deploy/ tests against a built pagoda: run.sh manifests|kustomize|fleet|lame_duck|lame_duck_nginx PATH/TO/pagoda
#   manifests  deploy/ against the Kubernetes, KEDA, Prometheus Operator and Gateway API schemas and
#              against the binary (seconds)
#   kustomize  `kubectl kustomize` renders the base and the overlays offline (seconds; kubectl
#              from the PATH if its kustomize is v4+, else tests/e2e/node/.kubectl/kubectl)
#   fleet      three `pagoda serve` behind HAProxy, scraped by Prometheus, under load, with a
#              SIGTERM and a kill -9 (about a minute)
#   lame_duck  two `pagoda serve` behind HAProxy (readiness checks, no preStop), SIGTERM mid-load,
#              LAME_DUCK_ROUNDS rounds (default 3; about 10 s each): no request lost
#   lame_duck_nginx  the same behind nginx (no health checks: passive failures and retries only)
# Exits 77 (CTest: skipped) with the reason when a tool it needs is missing; in strict mode (CI set,
# or PAGODA_STRICT=1) it fails instead. scripts/install-deps.sh installs node, the npm packages,
# HAProxy, Prometheus and a kubectl.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
usage="usage: run.sh manifests|kustomize|fleet|lame_duck|lame_duck_nginx PATH/TO/pagoda"
mode="${1:?$usage}"
binary="${2:?$usage}"
strict=0
if { [ -n "${CI:-}" ] && [ "${CI}" != false ] && [ "${CI}" != 0 ]; } || [ "${PAGODA_STRICT:-0}" = 1 ]; then strict=1; fi
skip() { echo "SKIP: $*"; exit 77; }
missing() {
  if [ $strict = 1 ]; then echo "FAIL (strict mode): $*" >&2; exit 1; fi
  skip "$@"
}
command -v node >/dev/null 2>&1 || missing "node is not installed (scripts/install-deps.sh installs it)"
for p in yaml kubernetes-models @kubernetes-models/keda @kubernetes-models/prometheus-operator @kubernetes-models/gateway-api ajv; do
  [ -d "$here/../node_modules/$p" ] || missing "npm package $p missing; run: (cd tests/e2e/node && npm ci)"
done
case "$mode" in
  # Hang guards, not bounds: compiling the Kubernetes schemas is CPU-bound and a loaded host (CPU
  # hogs, parallel builds) slows it tenfold; the drain inside is judged against measured speed.
  manifests) tests=(manifests.test.js); timeout=600000 ;;
  kustomize)
    # A kubectl on the PATH whose embedded kustomize is v4 or later, else the one
    # scripts/install-deps.sh unpacks (kubectl 1.22.0, kustomize v4.2.0).
    kv=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p' || true)
    if [ "${kv:-0}" -ge 4 ]; then export KUBECTL=kubectl
    elif [ -x "$here/../.kubectl/kubectl" ]; then export KUBECTL="$here/../.kubectl/kubectl"
    else missing "no kubectl >= 1.21 (Debian 12's is too old: its kustomize is v3); scripts/install-deps.sh unpacks one into tests/e2e/node/.kubectl/"
    fi
    tests=(kustomize.test.js); timeout=60000 ;;
  fleet)
    command -v haproxy >/dev/null 2>&1 || missing "haproxy is not installed (scripts/install-deps.sh installs Debian's haproxy)"
    command -v prometheus >/dev/null 2>&1 || missing "prometheus is not installed (scripts/install-deps.sh installs Debian's prometheus)"
    # Generous: the test's own patience scales with the speed it measures (slow under CPU hogs).
    tests=(fleet.test.js); timeout=840000 ;;
  lame_duck)
    command -v haproxy >/dev/null 2>&1 || missing "haproxy is not installed (scripts/install-deps.sh installs Debian's haproxy)"
    tests=(lame_duck.test.js); timeout=$(( (${LAME_DUCK_ROUNDS:-3} * 30 + 60) * 1000 )) ;;
  lame_duck_nginx)
    command -v nginx >/dev/null 2>&1 || missing "nginx is not installed (scripts/install-deps.sh installs Debian's nginx)"
    export LAME_DUCK_BALANCER=nginx
    tests=(lame_duck.test.js); timeout=$(( (${LAME_DUCK_ROUNDS:-3} * 30 + 60) * 1000 )) ;;
  *) echo "run.sh: unknown test '$mode' (manifests, kustomize, fleet, lame_duck or lame_duck_nginx)" >&2; exit 2 ;;
esac
export PAGODA_BINARY="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
cd "$here"
exec node --test --test-concurrency=1 --test-timeout="$timeout" "${tests[@]}"
