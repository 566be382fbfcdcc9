# allot's build targets. `make test` is the README's test command and what
# CI runs; `make run` starts the all-in-one cluster.
.PHONY: build test run generate bench fuzz vet chaos dradiff

build:
	go build -ldflags "$$(./hack/version-ldflags.sh)" -o bin/allot ./cmd/allot

test:
	./hack/test.sh

run:
	./hack/run.sh

vet:
	go vet ./...

# Regenerate deepcopy code after changing API types.
generate:
	go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.0 object:headerFile=hack/boilerplate.go.txt paths=./api/...
	GOBIN=$(CURDIR)/_output/bin go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	GOBIN=$(CURDIR)/_output/bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
	cd api/dra/v1alpha1 && PATH=$(CURDIR)/_output/bin:$$PATH protoc --go_out=paths=source_relative:. --go-grpc_out=paths=source_relative:. api.proto

# Benchmarks with real iteration counts (reported in bench/README.md).
bench:
	go test -run '^$$' -bench . -benchmem -timeout 60m ./bench/... ./pkg/allocator/... ./internal/storage/...

# The differential test of allot's resource.k8s.io/v1 allocator against
# Kubernetes' (test/dradiff), long: 400,000 random cases (~15 min);
# DRADIFF_SEED picks another seed. make test runs 10,000 with a fixed one.
DRADIFF_SEED ?= 20261126
dradiff:
	go test ./test/dradiff/ -run TestDifferential -dradiff.long -dradiff.seed=$(DRADIFF_SEED) -timeout 2h -v

# Longer fuzzing runs, one target at a time.
fuzz:
	go test ./api/validation -run '^$$' -fuzz FuzzDecodeValidate -fuzztime 5m

# A long chaos run (test/chaos): components killed with SIGKILL at random
# under a churn of DRA pods, then every invariant checked. Prints a report
# (and writes it to $(CHAOS_REPORT)); the component logs are kept.
DURATION ?= 10m
RATE ?= 3
KILL_INTERVAL ?= 3s
SEED ?= 1
SETTLE ?= 90s
CHAOS_REPORT ?= _output/chaos-report.txt
chaos:
	@mkdir -p $(dir $(CHAOS_REPORT))
	go test -count=1 -v -run '^TestChaos$$' -timeout 0 ./test/chaos \
		-chaos.duration $(DURATION) -chaos.rate $(RATE) -chaos.kill-interval $(KILL_INTERVAL) \
		-chaos.seed $(SEED) -chaos.settle $(SETTLE) -chaos.keep -chaos.report $(abspath $(CHAOS_REPORT))
