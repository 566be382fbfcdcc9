// Package hosts is the separate-hosts suite: node agents run on hosts of
// their own, network namespaces the test makes, and reach the control
// plane over a veth pair and a bridge, over TLS with the cluster's CA and
// a node token each, as agents on other machines join a cluster. Pods run
// in runc containers with the example drivers gpu.example.com
// (node-local devices) and fabric.example.com (units of a pool every node
// reaches).
//
// The scenarios cut one host's link (inside its own namespace), delete a
// lost node's Node, and kill the leading scheduler and controller manager
// during a pod churn; they check the recovery step by step and the
// chaos suite's invariants (test/chaos), and log the recovery times the
// operator guide reports ("When a machine fails"). README.md has the
// flow.
//
// The suite needs root, iproute2's `ip netns`, nsenter and runc; without
// them its tests skip (and fail under CI=true). It removes only what it
// made: its namespaces, veths and bridge by name (derived from the test
// process's PID), and its processes by PID and process group.
package hosts
