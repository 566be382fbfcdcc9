#!/usr/bin/env bash
# Installs what allot's build, demo and tests need, when missing: Debian's
# etcd-server (external-etcd tests), kubectl (compatibility tests), runc and
# busybox-static (containers), with --test chromium (the dashboard's browser
# test, run headless; never a tool's own browser download), and the Go
# modules. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v kubectl >/dev/null 2>&1 || need+=(kubectl)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /bin/busybox ] || need+=(busybox-static)
# Only the tests need a browser: `hack/setup.sh --test`.
if [ "${1:-}" = "--test" ]; then
  [ -x /usr/bin/chromium ] || need+=(chromium)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing ${need[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
go mod download
