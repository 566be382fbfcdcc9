#!/usr/bin/env bash
# Prints the -ldflags value that stamps allot's version (internal/version)
# into a build; `make build` and hack/run.sh use it:
#   go build -ldflags "$(hack/version-ldflags.sh)" -o bin/allot ./cmd/allot
#
#  - version: `git describe --tags --always --dirty` when a v* tag is
#    reachable; else left unset, and internal/version derives it.
#  - gitCommit, gitTreeState (clean/dirty): from git, in a git checkout.
#  - buildDate: now, in UTC (RFC 3339).
# Outside a git checkout (a tarball) only buildDate is set.
# /version and nodes' kubeletVersion carry the version as build metadata
# of the Kubernetes API level: v1.37.0+allot.VERSION (internal/version).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 0
pkg=allot.dev/allot/internal/version
flags=()
# Only this tree's own checkout: not a repository it happens to sit in.
if top=$(git rev-parse --show-toplevel 2>/dev/null) && [ "$top" -ef . ] &&
  commit=$(git rev-parse HEAD 2>/dev/null); then
  if git describe --tags --abbrev=0 --match 'v[0-9]*' >/dev/null 2>&1 &&
    version=$(git describe --tags --always --dirty --match 'v[0-9]*' 2>/dev/null); then
    flags+=("-X $pkg.version=$version")
  fi
  flags+=("-X $pkg.gitCommit=$commit")
  if status=$(git status --porcelain 2>/dev/null); then
    if [ -n "$status" ]; then
      flags+=("-X $pkg.gitTreeState=dirty")
    else
      flags+=("-X $pkg.gitTreeState=clean")
    fi
  fi
fi
flags+=("-X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
echo "${flags[*]}"
