// Package e2e tests allot as a user meets it: the real `allot` binary runs
// as a child process (`allot up`, with an embedded etcd or against an
// external etcd cluster) and is driven with the allot CLI and kubectl,
// through the kubeconfig that `allot up` writes.
//
// TestMain builds ./cmd/allot once and finds kubectl (installing Debian's
// package when it runs as root and kubectl is missing). Each test starts its
// own cluster in temporary directories on free loopback ports, and stops
// every process it started, by process group, in t.Cleanup.
//
// The external-etcd test needs Debian's etcd-server binary; without it the
// test is skipped, or fails when CI=true or ALLOT_REQUIRE_ETCD=1.
package e2e
