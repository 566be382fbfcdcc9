#!/usr/bin/env bash
# go build with a progress report, for hack/run.sh: a first build on a
# 2-core machine compiles about 1,300 packages for several minutes, which
# would otherwise look like a hang. Arguments go to `go build`. On a
# terminal one line counts the packages compiled so far out of the ones
# the build needs; otherwise a line every 100 packages. Compiler errors
# pass through as they are. Ends with the build's duration.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=$(go list -deps ./cmd/allot 2>/dev/null | wc -l || echo 0)
echo "building bin/allot: the first build compiles up to $pkgs packages and takes a few minutes on 2 cores; later builds take seconds"
start=$(date +%s)
tty=0
[ -t 1 ] && tty=1
go build -v "$@" 2>&1 | awk -v total="$pkgs" -v tty="$tty" '
  /^[^ :]+$/ {
    n++
    if (tty) { printf "\r  compiled %d/%d  %-60.60s\033[K", n, total, $0; fflush() }
    else if (n % 100 == 0) { printf "  compiled %d/%d packages\n", n, total; fflush() }
    next
  }
  { if (tty && n) printf "\n"; print; fflush() }
  END { if (tty && n) printf "\r  compiled %d packages\033[K\n", n }'
echo "built bin/allot in $(( $(date +%s) - start ))s"
