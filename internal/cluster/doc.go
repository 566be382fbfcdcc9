// Package cluster assembles allot's components into the all-in-one
// cluster that `allot up` runs, and the API server alone for `allot
// apiserver`: storage (embedded or external etcd), tokens, certificates,
// the API server, and the kubeconfig that clients use.
package cluster
