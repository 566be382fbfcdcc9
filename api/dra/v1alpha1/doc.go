// Package v1alpha1 is the DRA node API: what allot's node agent calls on a
// dynamic resource allocation driver's kubelet plugin, generated from
// api.proto (api.pb.go, api_grpc.pb.go; regenerate with `make generate`,
// which needs protoc), and the values a plugin registers with
// (constants.go). The plugin serves the API on a unix socket that it
// announces through the plugin registration API
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1, type PluginType,
// supported version Version).
//
// Rules (seed 000): NodePrepareResources and NodeUnprepareResources are
// idempotent; the node agent calls NodeUnprepareResources at least once for
// every claim that NodePrepareResources prepared; both are batched and
// answer each claim on its own.
package v1alpha1
