#!/usr/bin/env bash
# Prints the path of a syft binary (github.com/anchore/syft, the SBOM generator that
# scripts/build-image.sh runs), building it once from the Go module proxy into the cache:
#
#   ${FABRICCAP_CACHE_DIR:-$HOME/.cache/fabriccap}/bin/syft-<version>/syft
#
# No release download is reachable from our machines, so it is built like the repo's other Go
# tools (fabriccap_devtools.gotools): `go install module@version`, with Go's default module and
# build caches. The module is pinned by version and by its h1: checksum (its go.sum then pins
# every dependency, and the Go checksum database verifies each download). The version is
# stamped the way syft's release builds do it (-X main.version), so `syft version` and the
# SBOM's creator name it. Static (CGO_ENABLED=0). Needs the Go version syft's go.mod asks for;
# an older go fetches that toolchain from the module proxy (GOTOOLCHAIN=auto). About 3-4
# minutes on 2 cores the first time, and ~2 GiB of module cache.
#
#   TEST_ASSET_SYFT=/path/to/syft   use that binary (like TEST_ASSET_HELM)
#
# Progress goes to stderr; stdout is only the path.
set -euo pipefail

SYFT_VERSION="v1.57.1"
SYFT_MODULE_SUM="h1:lrbWhc8hbZJSKekMdB3PKetO0upE+lv9ihUfv9CXgfU="

say() { echo "ensure-syft: $*" >&2; }

if [ -n "${TEST_ASSET_SYFT:-}" ]; then
  if [ ! -x "$TEST_ASSET_SYFT" ]; then
    say "TEST_ASSET_SYFT=$TEST_ASSET_SYFT is not an executable file"
    exit 1
  fi
  echo "$TEST_ASSET_SYFT"
  exit 0
fi

cache="${FABRICCAP_CACHE_DIR:-$HOME/.cache/fabriccap}/bin"
target="$cache/syft-$SYFT_VERSION/syft"
if [ -x "$target" ]; then
  echo "$target"
  exit 0
fi

mkdir -p "$cache"
# One builder at a time (parallel test sessions, CI steps); the loser re-checks after waiting.
exec 9>"$cache/syft.lock"
flock 9
if [ -x "$target" ]; then
  echo "$target"
  exit 0
fi

go="$(command -v go || true)"
if [ -z "$go" ] && [ -x /usr/local/go/bin/go ]; then go=/usr/local/go/bin/go; fi
if [ -z "$go" ]; then
  say "no Go toolchain on PATH to build syft (Go >= 1.25; see README)"
  exit 1
fi

scratch="$(mktemp -d "$cache/.syft-XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
# GOFLAGS from the environment (-mod=mod, say) must not loosen syft's go.sum.
export CGO_ENABLED=0 GOWORK=off GOFLAGS="" GOTOOLCHAIN=auto GOBIN="$scratch/bin"

# The checksum of the module itself, before anything of it is compiled.
sum="$(cd "$scratch" && "$go" mod download -json "github.com/anchore/syft@$SYFT_VERSION" \
  | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",*$/\1/p')"
if [ "$sum" != "$SYFT_MODULE_SUM" ]; then
  say "github.com/anchore/syft@$SYFT_VERSION has checksum '$sum', expected $SYFT_MODULE_SUM"
  exit 1
fi

say "building syft $SYFT_VERSION from the Go module proxy (once; a few minutes)"
start=$(date +%s)
(cd "$scratch" && "$go" install -trimpath -ldflags "-s -w -X main.version=${SYFT_VERSION#v}" \
  "github.com/anchore/syft/cmd/syft@$SYFT_VERSION") >&2

# Moved into place only if it runs and reports the pinned version.
reported="$(SYFT_CHECK_FOR_APP_UPDATE=false "$scratch/bin/syft" version 2>/dev/null \
  | sed -n 's/^Version:[[:space:]]*//p')"
if [ "$reported" != "${SYFT_VERSION#v}" ]; then
  say "the syft built reports version '$reported', expected ${SYFT_VERSION#v}"
  exit 1
fi
mkdir -p "$(dirname "$target")"
mv -f "$scratch/bin/syft" "$target.tmp" && mv -f "$target.tmp" "$target"
say "built $target in $(($(date +%s) - start)) s"
echo "$target"
