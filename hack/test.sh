#!/usr/bin/env bash
# The whole test suite: set-up, vet, unit/integration/e2e tests (fuzz
# targets run their seed corpus), the race detector on the concurrent core,
# and every benchmark once as a smoke run.
set -euo pipefail
cd "$(dirname "$0")/.."
./hack/setup.sh --test
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
ALLOT_BENCH_OBJECTS=5000 ALLOT_BENCH_NODES=50 ALLOT_BENCH_PODS=300 go test -count=1 -run '^$' -bench . -benchtime 1x -timeout 30m ./...
