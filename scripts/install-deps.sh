#!/usr/bin/env bash
# Installs the Debian 12 packages pagoda builds and tests with. Idempotent; uses sudo when not root.
# PAGODA_DEPS=build installs only what the build needs (no test servers, no Node.js): the
# container image's build stage (deploy/Dockerfile) uses that.
set -euo pipefail
DEPS=${PAGODA_DEPS:-all}
case "$DEPS" in
  all | build) ;;
  *) echo "pagoda: PAGODA_DEPS must be 'all' or 'build', not '$DEPS'" >&2; exit 2 ;;
esac
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev libpcre2-dev libomp-dev
  python3 python3-jinja2
  libboost1.81-dev libssl-dev
  libvulkan-dev glslc spirv-tools mesa-vulkan-drivers vulkan-validationlayers
)
# The test suite's real servers: Prometheus and HAProxy for the fleet test (tests/e2e/node/deploy).
# kubectl is not among them: Debian 12's (kubernetes-client 1.20) embeds a kustomize too old for
# deploy/kubernetes; the kustomize test uses a newer kubectl where the machine has one.
# Chromium for the dashboard's browser test (tests/e2e/node/tests/dashboard.test.js, via playwright-core).
if [ "$DEPS" = all ]; then PACKAGES+=(prometheus haproxy chromium); fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "pagoda: installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ "$DEPS" = build ]; then exit 0; fi
# Node.js for the end-to-end client tests (tests/e2e/node). A node already on the machine (e.g. from
# NodeSource, which bundles npm) is left alone; Debian's nodejs + npm only when there is none.
if ! command -v node >/dev/null 2>&1; then
  echo "pagoda: installing Debian nodejs and npm" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
# npm packages of the Node end-to-end tests (openai, ws, the Kubernetes schema validators, yaml,
# playwright-core),
# pinned by package-lock.json.
node_tests="$(cd "$(dirname "$0")/.." && pwd)/tests/e2e/node"
if [ -f "$node_tests/package-lock.json" ] && command -v npm >/dev/null 2>&1; then
  if [ ! -d "$node_tests/node_modules/openai" ] || [ ! -d "$node_tests/node_modules/ws" ] ||
     [ ! -d "$node_tests/node_modules/kubernetes-models" ] || [ ! -d "$node_tests/node_modules/playwright-core" ] ||
     [ "$node_tests/package-lock.json" -nt "$node_tests/node_modules" ]; then
    echo "pagoda: installing the Node test packages (npm ci in tests/e2e/node)" >&2
    (cd "$node_tests" && npm ci --no-audit --no-fund --loglevel=error) || echo "pagoda: npm ci failed; the Node e2e tests will be skipped" >&2
  fi
fi
