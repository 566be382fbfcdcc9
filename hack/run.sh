#!/usr/bin/env bash
# Builds allot, starts the all-in-one cluster in ./_output/cluster with the
# example device plugin and DRA driver, and runs the demo pod.
# Once it is up, in another shell:
#   export KUBECONFIG=$PWD/_output/cluster/kubeconfig
#   ./bin/allot get nodes      # or kubectl get nodes
set -euo pipefail
cd "$(dirname "$0")/.."
./hack/setup.sh
ldflags=$(hack/version-ldflags.sh)
hack/build-progress.sh -ldflags "$ldflags" -o bin/allot ./cmd/allot
mkdir -p _output/cluster
exec ./bin/allot up --demo --data-dir _output/cluster --listen 127.0.0.1:6443 "$@"
