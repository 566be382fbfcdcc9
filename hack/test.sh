#!/usr/bin/env bash
# The whole test suite: set-up, vet, unit/integration/e2e tests (fuzz
# targets run their seed corpus), the race detector on the concurrent core,
# and every benchmark once as a smoke run.
#
# It runs once, from a copy of the repository's files (tracked ones, and
# new ones git would add) in a fresh directory with nothing beside it,
# ${TMPDIR:-/tmp}/allot-test-UID/allot: a test that reads a file outside
# the repository fails here as it would in any other clone. The copy is
# made anew each run at the same path, so Go's build cache stays warm; it
# is removed after a pass and kept (its path printed) after a failure.
# ALLOT_TEST_IN_PLACE=1 runs in the working tree instead.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${ALLOT_TEST_IN_PLACE:-}" ]; then
  ./hack/setup.sh --test # in the working tree: what it builds (kubectl) stays
  base="${TMPDIR:-/tmp}/allot-test-$(id -u)"
  copy="$base/allot"
  rm -rf "$base"
  mkdir -p "$copy"
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Tracked files as they are in the working tree, and untracked ones
    # that are not ignored; files deleted but not yet committed are left out.
    git ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
      tar --null -T - -cf - | tar -xf - -C "$copy"
  else # a tarball: everything but build output
    tar --exclude=./_output --exclude=./bin -cf - . | tar -xf - -C "$copy"
  fi
  echo "== testing a copy of the repository in $copy"
  if [ -x _output/bin/kubectl ]; then # after PATH's own, as setup.sh chose
    export PATH="$PATH:$PWD/_output/bin"
  fi
  if ALLOT_TEST_IN_PLACE=1 ALLOT_TEST_SETUP_DONE=1 "$copy/hack/test.sh"; then
    rm -rf "$base"
  else
    echo "== failed; the tested copy stays in $copy" >&2
    exit 1
  fi
  exit 0
fi

if [ -z "${ALLOT_TEST_SETUP_DONE:-}" ]; then
  ./hack/setup.sh --test
fi
export ALLOT_REQUIRE_ETCD=1
echo "== go vet"
go vet ./...
echo "== go test"
go test -count=1 -timeout 30m ./...
echo "== go test -race (concurrent core)"
go test -count=1 -race -timeout 30m ./internal/storage/... ./internal/apiserver/... ./api/... \
  ./internal/scheduler/... ./internal/node/devicemanager/... ./internal/node/dra/... ./pkg/allocator/... \
  ./pkg/driver/...
echo "== benchmarks (one iteration each, small sizes)"
ALLOT_BENCH_OBJECTS=5000 ALLOT_BENCH_NODES=50 ALLOT_BENCH_PODS=300 ALLOT_BENCH_DOWN=1s go test -count=1 -run '^$' -bench . -benchtime 1x -timeout 30m ./...
