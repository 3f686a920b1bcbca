#!/usr/bin/env bash
# The project's Debian packages (scripts/debian-packages.txt), by group.
#   debian-packages.sh list [GROUP...]     the declared packages (every group when none is named)
#   debian-packages.sh missing [GROUP...]  those dpkg-query does not report installed
#   debian-packages.sh install [GROUP...]  apt-get install the missing ones (root)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
list_file="$here/debian-packages.txt"

command_name="${1:-}"
[ $# -gt 0 ] && shift
groups=("$@")

declared() {
  local package its_groups _ wanted
  while read -r package its_groups _; do
    case "$package" in '' | '#'*) continue ;; esac
    if [ "${#groups[@]}" -eq 0 ]; then
      echo "$package"
      continue
    fi
    for wanted in "${groups[@]}"; do
      if [[ ",$its_groups," == *",$wanted,"* ]]; then
        echo "$package"
        break
      fi
    done
  done <"$list_file"
}

missing() {
  local package
  for package in $(declared); do
    # "install ok installed" only: a package removed but not purged ("deinstall ok config-files")
    # has left its commands' files behind no more than one never installed.
    if [ "$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)" != "install ok installed" ]; then
      echo "$package"
    fi
  done
}

case "$command_name" in
  list) declared ;;
  missing) missing ;;
  install)
    mapfile -t absent < <(missing)
    [ "${#absent[@]}" -eq 0 ] && exit 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
      echo "debian-packages: ${absent[*]} not installed and apt-get unavailable (not root?); the tests that need them will fail" >&2
      exit 1
    fi
    echo "debian-packages: installing ${absent[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # No recommends: crun (fails on hybrid cgroup hosts) and fuse-overlayfs are not used.
    apt-get install -y -qq --no-install-recommends "${absent[@]}" >/dev/null
    mapfile -t still < <(missing)
    if [ "${#still[@]}" -gt 0 ]; then
      echo "debian-packages: still not installed after apt-get: ${still[*]}" >&2
      exit 1
    fi
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
