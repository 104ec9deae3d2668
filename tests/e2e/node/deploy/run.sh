#!/usr/bin/env bash
# Runs one of the deploy/ tests against a built pagoda: run.sh manifests|kustomize|fleet PATH/TO/pagoda
#   manifests  deploy/ against the Kubernetes, KEDA, Prometheus Operator and Gateway API schemas and
#              against the binary (seconds)
#   kustomize  `kubectl kustomize` renders the base and the overlays offline (seconds)
#   fleet      three `pagoda serve` behind HAProxy, scraped by Prometheus, under load, with a
#              SIGTERM and a kill -9 (about a minute)
# Exits 77 (CTest: skipped) with the reason when a tool it needs is missing; in strict mode (CI set,
# or PAGODA_STRICT=1) a missing node, npm package, HAProxy or Prometheus fails instead.
# scripts/install-deps.sh installs node, the npm packages, HAProxy and Prometheus.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode="${1:?usage: run.sh manifests|kustomize|fleet PATH/TO/pagoda}"
binary="${2:?usage: run.sh manifests|kustomize|fleet PATH/TO/pagoda}"
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
  manifests) tests=(manifests.test.js); timeout=120000 ;;
  kustomize)
    command -v kubectl >/dev/null 2>&1 || skip "kubectl is not installed (Debian 12's kubernetes-client is too old: its kustomize is v2)"
    kv=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p')
    [ -n "$kv" ] && [ "$kv" -ge 4 ] || skip "kubectl's embedded kustomize is older than v4 ($(kubectl version --client 2>&1 | head -1)); deploy/kubernetes needs kubectl >= 1.21"
    tests=(kustomize.test.js); timeout=60000 ;;
  fleet)
    command -v haproxy >/dev/null 2>&1 || missing "haproxy is not installed (scripts/install-deps.sh installs Debian's haproxy)"
    command -v prometheus >/dev/null 2>&1 || missing "prometheus is not installed (scripts/install-deps.sh installs Debian's prometheus)"
    tests=(fleet.test.js); timeout=240000 ;;
  *) echo "run.sh: unknown test '$mode' (manifests, kustomize or fleet)" >&2; exit 2 ;;
esac
export PAGODA_BINARY="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
cd "$here"
exec node --test --test-concurrency=1 --test-timeout="$timeout" "${tests[@]}"
