# allot's build targets. `make test` is the README's test command and what
# CI runs; `make run` starts the all-in-one cluster.
.PHONY: build test run generate bench fuzz vet

build:
	go build -o bin/allot ./cmd/allot

test:
	./hack/test.sh

run:
	./hack/run.sh

vet:
	go vet ./...

# Regenerate deepcopy code after changing API types.
generate:
	go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.0 object:headerFile=hack/boilerplate.go.txt paths=./api/...

# Benchmarks with real iteration counts (reported in bench/README.md).
bench:
	go test -run '^$$' -bench . -benchmem -timeout 60m ./bench/... ./pkg/allocator/... ./internal/storage/...

# Longer fuzzing runs, one target at a time.
fuzz:
	go test ./api/validation -run '^$$' -fuzz FuzzDecodeValidate -fuzztime 5m
