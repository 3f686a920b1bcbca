#!/usr/bin/env bash
# Builds the operator image from the repo's Dockerfile without Docker or a registry (`make image`):
#
#   1. base: a Debian bookworm minbase rootfs with python3, python3-venv, python-is-python3 and
#      ca-certificates, made by mmdebstrap from scripts/base-packages-<arch>.lock (the whole
#      package closure, pkg=version) with a fixed SOURCE_DATE_EPOCH: the same lock and mirror
#      give a bit-identical rootfs tar and the same base image ID. Cached by a key of its inputs.
#   2. buildah bud of the Dockerfile, the one `docker build` uses, with
#      --build-arg PYTHON_IMAGE=<that base> and the layer cache on. Reproducible: every timestamp
#      is SOURCE_DATE_EPOCH (the Dockerfile's builder stage declares it, so pip writes hash-based
#      .pyc that stay valid whatever the files' mtimes).
#   3. buildah push to an OCI archive, dist/fabriccap-<version>.oci.tar; its manifest digest
#      (what containerd and the kubelet see after `ctr images import --base-name … --digests`)
#      goes to <archive>.digest.
#   4. an SPDX SBOM of the archive by syft (scripts/ensure-syft.sh): <archive>.spdx.json.
#
#   build-image.sh                 build; stdout is the digest (sha256:…), progress on stderr
#   build-image.sh --no-sbom       skip the SBOM
#   build-image.sh --update-lock   re-resolve the base lock from the current mirror (when a pinned
#                                  version has left it: the build says so), then build
#   build-image.sh --tools         only install the tools (Debian packages, syft) and exit
#
# Environment:
#   FABRICCAP_CACHE_DIR      cache root (default ~/.cache/fabriccap); this script uses <it>/image/
#   FABRICCAP_IMAGE_OUT      output directory (default <repo>/dist)
#   FABRICCAP_IMAGE_NAME     image name (default ghcr.io/fabriccap/fabriccap); tag = project version
#   FABRICCAP_DEBIAN_MIRROR  Debian mirror (default http://deb.debian.org/debian), and
#   FABRICCAP_DEBIAN_SECURITY_MIRROR  for bookworm-security (default …/debian-security)
#   FABRICCAP_CA_BUNDLE      CA bundle bind-mounted read-only over the build's
#                            /etc/ssl/certs/ca-certificates.crt, so that pip trusts what the host
#                            trusts (default the host's; "none" to mount nothing). It never
#                            reaches the image: the final stage copies only /opt/fabriccap.
#   FABRICCAP_STORAGE_DRIVER overlay or vfs (default overlay when it works here, else vfs)
#   TEST_ASSET_SYFT          a syft binary to use instead of building one
#
# Needs root: buildah's storage and chroot isolation, mmdebstrap's root mode. Installs the image
# group of scripts/debian-packages.txt (buildah, runc, mmdebstrap, uidmap, gpg...) when missing.
# Everything it keeps is under the cache (buildah's storage included, never
# /var/lib/containers/storage), and it runs in a private mount namespace, so none of its mounts
# outlives it, even when it is killed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${FABRICCAP_CACHE_DIR:-$HOME/.cache/fabriccap}/image"
out="${FABRICCAP_IMAGE_OUT:-$repo/dist}"
image_name="${FABRICCAP_IMAGE_NAME:-ghcr.io/fabriccap/fabriccap}"
ca_bundle="${FABRICCAP_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
mirror="${FABRICCAP_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${FABRICCAP_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
driver="${FABRICCAP_STORAGE_DRIVER:-}"

say() { echo "build-image: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

sbom=1 update_lock=0 tools_only=0
for arg in "$@"; do
  case "$arg" in
    --no-sbom) sbom=0 ;;
    --update-lock) update_lock=1 ;;
    --tools) tools_only=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) say "unknown argument: $arg (see --help)"; exit 2 ;;
  esac
done

if [ "$(id -u)" != 0 ]; then
  say "needs root (buildah storage and chroot isolation, mmdebstrap's root mode)"
  exit 1
fi

# --- the base recipe: everything from here to the line of dashes is part of the base's key ----
SUITE=bookworm
ARCH="$(dpkg --print-architecture)"
BASE_PACKAGES=(python3 python3-venv python-is-python3 ca-certificates)
# 2025-01-01T00:00:00Z. mmdebstrap clamps every mtime to it (bit-reproducible tar); the image
# build uses it for every timestamp, so a cached layer equals a fresh one.
EPOCH=1735689600
BASE_ENV=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8)
LOCK="$repo/scripts/base-packages-$ARCH.lock"

# mmdebstrap's rootfs tar, /dev/* filtered out (root mode puts real device nodes there; the
# runtime mounts its own /dev). $1: output tar; $2: "pinned" (exactly the lock) or "unpinned"
# (the newest versions, for --update-lock).
#  - pinned: the lock is also an APT preferences file in the chroot while it is built (removed
#    after), so that every stage resolves to the pinned versions, the Essential and required
#    packages mmdebstrap installs before --include included. With --include alone those get the
#    newest version and apt then refuses the pin as a downgrade. A pin that has left the mirror
#    fails the build: "reproducible or fail loudly", as no snapshot mirror is reachable.
#  - merged-usr hook: without it bookworm pulls usrmerge and with it a full perl (127 packages
#    instead of 119); with the doc/man/locale excludes below the tar is 129 MB instead of 225 MB.
#    Copyright files stay (licenses in the SBOM); 99mmdebstrap keeps the excludes in the image.
#  - resolv.conf and hostname: mmdebstrap copies the host's, which leaks them into the image
#    and makes the tar differ from host to host.
#  - /usr/share/python3 (debpython, py3compile's own modules): compiled again as checked-hash
#    .pyc. Every other .pyc the packages' scripts write is hash-based (SOURCE_DATE_EPOCH is set),
#    but in one cold build of the same lock these five came out timestamp-based, recording the
#    source's packaged mtime; the image's fixed timestamps then made them stale (seen by
#    tests/image/test_image.py::test_no_stale_bytecode in a cold run, 2026-12-01).
# shellcheck disable=SC2016 # the hooks' "$1" (the chroot) is for mmdebstrap's shell to expand
make_base_rootfs() {
  local tar_out="$1" mode="$2" include prefs="$1.preferences" pin_hooks=()
  if [ "$mode" = pinned ]; then
    include="$(lock_lines "$LOCK" | paste -sd, -)"
    lock_lines "$LOCK" | awk -F= '{ print "Package: " $1 "\nPin: version " $2 "\nPin-Priority: 1001\n" }' >"$prefs"
    pin_hooks=(--setup-hook="cp '$prefs' \"\$1/etc/apt/preferences.d/fabriccap-base.pref\""
      --customize-hook='rm "$1/etc/apt/preferences.d/fabriccap-base.pref"')
  else
    include="$(IFS=,; echo "${BASE_PACKAGES[*]}")"
  fi
  SOURCE_DATE_EPOCH="$EPOCH" mmdebstrap --mode=root --variant=minbase --architectures="$ARCH" \
    "${pin_hooks[@]}" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook=': > "$1/etc/resolv.conf"' \
    --customize-hook='chroot "$1" python3 -m compileall -q -f --invalidation-mode checked-hash /usr/share/python3' \
    --customize-hook='echo localhost > "$1/etc/hostname"' \
    --include="$include" \
    "$SUITE" - \
    "deb $mirror $SUITE main" \
    "deb $mirror $SUITE-updates main" \
    "deb $security_mirror $SUITE-security main" \
    | mmtarfilter --path-exclude='/dev/*' >"$tar_out"
}

# The pins of a lock file, sorted (comments and order do not matter).
lock_lines() { grep -v -e '^#' -e '^$' "$1" | LC_ALL=C sort; }

# The dpkg database of a rootfs tar as sorted pkg=version lines.
rootfs_packages() {
  tar -xOf "$1" ./var/lib/dpkg/status \
    | awk '/^Package: /{p=$2} /^Version: /{print p "=" $2}' | LC_ALL=C sort
}

# A scratch image holds nothing but the rootfs: the env the Dockerfile's first RUN needs (PATH)
# is set here. The commit's timestamp is fixed and it carries no buildah-version label, so the
# image ID is the same on every machine, and a re-keyed base with the same content still hits
# the image build's layer cache.
commit_base() {
  local tar_in="$1" ref="$2" ctr env_args=() e
  for e in "${BASE_ENV[@]}"; do env_args+=(--env "$e"); done
  ctr="$(bah from --quiet scratch)"
  bah add --quiet "$ctr" "$tar_in" / >/dev/null
  bah config "${env_args[@]}" --cmd python3 --os linux --arch "$ARCH" "$ctr"
  bah commit --quiet --rm --timestamp "$EPOCH" --identity-label=false "$ctr" "$ref" >/dev/null
}
# ----------------------------------------------------------------------------------------------

# buildah on our own storage under the cache. Always pass --storage-driver: with only
# STORAGE_DRIVER in the environment, buildah 1.28 lists an existing vfs store as empty.
bah() {
  buildah --root "$cache/storage-$driver" --runroot "$cache/runroot-$driver" --storage-driver "$driver" "$@"
}

# --- tools -----------------------------------------------------------------------------------
bash "$repo/scripts/debian-packages.sh" install image
if [ "$tools_only" = 1 ]; then
  [ "$sbom" = 0 ] || bash "$repo/scripts/ensure-syft.sh" >/dev/null
  exit 0
fi

[ -f "$LOCK" ] || [ "$update_lock" = 1 ] || { say "no $LOCK (create it with --update-lock)"; exit 1; }
# Reproducible mode needs it: without it, --timestamp would leave every .pyc stale (their
# recorded source mtime would no longer match), and every start would recompile in memory.
grep -q '^ARG SOURCE_DATE_EPOCH$' "$repo/Dockerfile" \
  || { say "the Dockerfile's builder stage must declare ARG SOURCE_DATE_EPOCH"; exit 1; }
version="$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$repo/pyproject.toml" | head -1)"
[ -n "$version" ] || { say "no version in $repo/pyproject.toml"; exit 1; }

mkdir -p "$cache/base" "$cache/tmp" "$cache/networks" "$out"
# mmdebstrap lets apt download as _apt only when _apt can reach the chroot, and apt then gives
# the rootfs' partial/ dirs to _apt: their owner, and so the rootfs tar, would depend on where
# the cache is (world-readable or under a mode-700 home). Never reachable, always the same.
chmod 700 "$cache/tmp"
# From here on, in a private mount namespace: mmdebstrap's /proc, /sys and /dev in its chroot
# and buildah's overlay mounts exist only in it and die with it, even on kill -9.
if [ -z "${FABRICCAP_IMAGE_MOUNT_NS:-}" ]; then
  FABRICCAP_IMAGE_MOUNT_NS=1 exec unshare --mount --propagation private -- bash "${BASH_SOURCE[0]}" "$@"
fi
# One build per cache at a time (parallel sessions, CI steps).
exec 9>"$cache/lock"
flock 9

# Our own containers.conf: network state in the cache (the default netavark backend creates
# /etc/containers/networks and /run/containers/networks even with --network host; nothing runs
# with "cni" and host networking), and big temporary files in the cache, not /var/tmp.
printf '[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "%s"\n[engine]\nimage_copy_tmp_dir = "%s"\n' \
  "$cache/networks" "$cache/tmp" >"$cache/containers.conf"
export CONTAINERS_CONF="$cache/containers.conf" TMPDIR="$cache/tmp"
# containers/image keeps a blob-info cache at /var/lib/containers/cache when run as root, with
# no option to move it; it falls back to memory when it cannot create that directory. So /var/lib
# is read-only in this namespace (nothing here writes there: storage, scratch, output and the
# lock --update-lock rewrites are elsewhere), unless the cache, the output or the repo is under it.
case " $cache/ $out/ $repo/" in
  *" /var/lib/"*) say "cache, output or repo under /var/lib: /var/lib/containers/cache may be written" ;;
  *) mount --bind /var/lib /var/lib && mount -o remount,bind,ro /var/lib ;;
esac

if [ -z "$driver" ]; then
  # Kernel overlayfs as root: a cached rebuild takes ~2 s and each layer is stored once. vfs
  # (no mounts) copies the whole rootfs per layer: 5x the space, ~25 s even when all is cached.
  driver=overlay
  if ! bah info >/dev/null 2>"$cache/tmp/overlay-probe.err"; then
    say "overlay storage unusable here ($(tail -1 "$cache/tmp/overlay-probe.err")); using vfs"
    driver=vfs
  fi
fi
say "buildah storage: $cache/storage-$driver ($driver)"
# Working containers an interrupted build left in our private storage.
bah rm --all >/dev/null 2>&1 || true

scratch=""
cleanup() {
  rm -rf "$scratch"
}
trap cleanup EXIT
# Scratch dirs of a killed run (their mounts died with its namespace).
rm -rf "$cache/tmp"/build.* "$cache/tmp"/mmdebstrap.*
scratch="$(mktemp -d "$cache/tmp/build.XXXXXX")"

# --- base ------------------------------------------------------------------------------------
if [ "$update_lock" = 1 ]; then
  say "resolving the base packages from the mirror (unpinned): ${BASE_PACKAGES[*]}"
  t0="$(now)"
  if ! make_base_rootfs "$scratch/rootfs.tar" unpinned 2>"$scratch/mmdebstrap.log"; then
    tail -20 "$scratch/mmdebstrap.log" >&2
    exit 1
  fi
  {
    echo "# The base image's Debian packages ($SUITE, $ARCH): the whole closure of"
    echo "# ${BASE_PACKAGES[*]}, pinned like requirements.txt."
    echo "# scripts/build-image.sh installs exactly these and fails if the result differs."
    echo "# Regenerate from the current mirror with: scripts/build-image.sh --update-lock"
    rootfs_packages "$scratch/rootfs.tar"
  } >"$scratch/lock.new"
  if [ -f "$LOCK" ] && cmp -s <(lock_lines "$LOCK") <(lock_lines "$scratch/lock.new"); then
    say "$(basename "$LOCK") unchanged ($(since "$t0") s)"
  else
    diff <(lock_lines "$LOCK" 2>/dev/null || true) <(lock_lines "$scratch/lock.new") >&2 || true
    cp "$scratch/lock.new" "$LOCK"
    say "$(basename "$LOCK") updated ($(since "$t0") s): commit it"
  fi
fi

base_key="$(
  {
    echo "mmdebstrap $(mmdebstrap --version)"
    echo "mirrors $mirror $security_mirror"
    # The recipe itself (not the whole script: editing the image part must not rebuild the base).
    declare -f make_base_rootfs lock_lines rootfs_packages commit_base
    declare -p SUITE ARCH BASE_PACKAGES EPOCH BASE_ENV
    lock_lines "$LOCK"
  } | sha256sum | cut -c1-16
)"
base_dir="$cache/base/$base_key"
base_ref="localhost/fabriccap-base:$base_key"

if [ -f "$base_dir/rootfs.tar" ]; then
  say "base rootfs cached: $base_dir"
else
  say "building the base rootfs (mmdebstrap, $SUITE, $(lock_lines "$LOCK" | wc -l) pinned packages)"
  t0="$(now)"
  rm -f "$cache/tmp/mmdebstrap-failed.log"
  if ! make_base_rootfs "$scratch/rootfs.tar" pinned 2>"$scratch/mmdebstrap.log"; then
    cp "$scratch/mmdebstrap.log" "$cache/tmp/mmdebstrap-failed.log"
    grep -E '^(E|W): ' "$scratch/mmdebstrap.log" | cut -c1-400 >&2 || tail -20 "$scratch/mmdebstrap.log" >&2
    say "mmdebstrap failed (log: $cache/tmp/mmdebstrap-failed.log)"
    say "if a pinned version has left the mirror: $0 --update-lock"
    exit 1
  fi
  rootfs_packages "$scratch/rootfs.tar" >"$scratch/packages.txt"
  if ! diff <(lock_lines "$LOCK") "$scratch/packages.txt" >&2; then
    say "the base rootfs does not hold exactly $(basename "$LOCK") (diff above: < lock, > got)"
    exit 1
  fi
  mkdir -p "$base_dir"
  sha256sum <"$scratch/rootfs.tar" | cut -d' ' -f1 >"$scratch/rootfs.sha256"
  mv "$scratch/packages.txt" "$scratch/rootfs.sha256" "$scratch/mmdebstrap.log" "$base_dir/"
  mv "$scratch/rootfs.tar" "$base_dir/rootfs.tar"
  say "base rootfs built in $(since "$t0") s (sha256 $(cat "$base_dir/rootfs.sha256"))"
fi

if bah inspect --type image "$base_ref" >/dev/null 2>&1; then
  say "base image cached: $base_ref"
else
  t0="$(now)"
  # buildah's layer cache matches a step by the layers and history below it, not by the base's
  # config: layers cached on another base with the same rootfs would be reused, carrying that
  # base's Env and Labels into the image. So the storage holds one base's builds at a time.
  bah rmi --all --force >/dev/null 2>&1 || true
  commit_base "$base_dir/rootfs.tar" "$base_ref"
  say "base image committed in $(since "$t0") s: $base_ref"
fi

# --- image -----------------------------------------------------------------------------------
ref="$image_name:$version"
volume_args=()
if [ "$ca_bundle" != none ] && [ -f "$ca_bundle" ]; then
  volume_args=(--volume "$ca_bundle:/etc/ssl/certs/ca-certificates.crt:ro")
fi
# --layers: cache every step (the dependency layer stays while only the code changes; buildah's
#   default is no cache). --pull=never: the base is local; no registry is asked anything.
# --isolation chroot --runtime runc: RUN steps in a chroot, not an OCI runtime container (crun
#   fails on hybrid cgroups). --network host: pip reaches the package index as the host does.
# --timestamp + SOURCE_DATE_EPOCH + no buildah-version label: bit-reproducible. The epoch is a
#   constant because buildah's layer cache ignores --timestamp: a layer cached under another
#   epoch would differ from a fresh one.
bud_args=(--quiet --layers --pull=never
  --isolation chroot --runtime runc --network host
  "${volume_args[@]}"
  --timestamp "$EPOCH" --identity-label=false
  --build-arg "SOURCE_DATE_EPOCH=$EPOCH"
  --build-arg "PYTHON_IMAGE=$base_ref"
  -f "$repo/Dockerfile")
say "building $ref from $repo/Dockerfile"
t0="$(now)"
# The builder stage first, tagged: its layers (the dependency install) then have a name and
# survive the prune below; untagged, the prune deletes them (the final image does not descend
# from them) and the next build reinstalls every dependency.
bah bud "${bud_args[@]}" --target builder -t localhost/fabriccap-builder:latest "$repo" >/dev/null
bah bud "${bud_args[@]}" --iidfile "$scratch/iid" -t "$ref" "$repo" >/dev/null
say "image built in $(since "$t0") s: $(cat "$scratch/iid")"

# Drop what earlier builds left: untagged images no tagged one depends on (old code layers;
# under vfs each is a full rootfs copy), and the rootfs tars of all but the 2 newest base keys.
t0="$(now)"
touch "$base_dir"
# shellcheck disable=SC2012 # the keys are hex names
for d in $(ls -1t "$cache/base" | tail -n +3); do rm -rf "${cache:?}/base/$d"; done
bah rmi --prune >/dev/null 2>&1 || true
say "pruned in $(since "$t0") s; storage $(du -sm "$cache/storage-$driver" | cut -f1) MiB"

# --- OCI archive + digest --------------------------------------------------------------------
archive="$out/fabriccap-$version.oci.tar"
t0="$(now)"
# Outputs of an earlier build go first: a failed build must not leave an old digest next to a
# new archive, or an SBOM of another image.
rm -f "$archive" "$archive.digest" "$archive.spdx.json"
bah push --quiet --digestfile "$scratch/digest" "$ref" "oci-archive:$archive:$ref" >&2
digest="$(cat "$scratch/digest")"
# index.json names one manifest: it must be the digest buildah reported and the sha256 of the
# manifest blob. That is the digest containerd records on import (`ctr images import
# --base-name NAME --digests` creates NAME@DIGEST) and the kubelet resolves. (buildah images
# --digests shows another one: its storage keeps the manifest with uncompressed layers.)
python3 - "$archive" "$digest" <<'PY'
import hashlib, json, sys, tarfile
archive, want = sys.argv[1], sys.argv[2]
with tarfile.open(archive) as tar:
    index = json.load(tar.extractfile("index.json"))
    (entry,) = index["manifests"]
    blob = tar.extractfile("blobs/" + entry["digest"].replace(":", "/")).read()
got = "sha256:" + hashlib.sha256(blob).hexdigest()
if not (entry["digest"] == got == want):
    sys.exit(f"digest mismatch: index.json {entry['digest']}, manifest blob {got}, buildah {want}")
PY
echo "$digest" >"$archive.digest"
say "archive written in $(since "$t0") s: $archive ($(du -m "$archive" | cut -f1) MiB)"

# --- SBOM ------------------------------------------------------------------------------------
if [ "$sbom" = 1 ]; then
  syft="$(bash "$repo/scripts/ensure-syft.sh")"
  t0="$(now)"
  # From the scratch dir: syft reads a .syft.yaml in the working directory. No update check (it
  # would call home); its cache in ours rather than ~/.cache/syft.
  (cd "$scratch" && SYFT_CHECK_FOR_APP_UPDATE=false SYFT_CACHE_DIR="$cache/syft" \
    "$syft" scan --quiet "oci-archive:$archive" --source-name "$image_name" --source-version "$version" \
    -o "spdx-json=$archive.spdx.json") >&2
  say "SBOM written in $(since "$t0") s: $archive.spdx.json"
fi

say "image: $image_name:$version@$digest"
echo "$digest"
