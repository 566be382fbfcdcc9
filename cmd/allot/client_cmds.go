package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"

	"allot.dev/allot/pkg/client"
)

// addClientCommands adds the kubectl-like client commands: apply, get,
// describe, delete and logs. They speak to the API server through
// pkg/client: kinds are resolved through discovery (so custom resources
// work like built-in kinds) and objects travel through the dynamic client.
func addClientCommands(root *cobra.Command) {
	root.AddCommand(newApplyCommand(), newGetCommand(), newDescribeCommand(), newDeleteCommand(), newLogsCommand())
}

// clientFlags are the connection flags of every client command.
type clientFlags struct {
	kubeconfig string
	namespace  string
}

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else the one the last allot up wrote)")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "namespace (default: the kubeconfig context's, else \"default\")")
}

// session is one command's connection: the client, the namespace to use
// and the kind resolver.
type session struct {
	c      *client.Client
	ns     string
	nsSet  bool // -n was given: objects in other namespaces are an error
	kinds  *kindMapper
	out    io.Writer
	errOut io.Writer
}

func (f *clientFlags) open(cmd *cobra.Command) (*session, error) {
	cfg, err := client.LoadConfig(f.kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := client.NewForConfig(cfg.REST)
	if err != nil {
		return nil, err
	}
	s := &session{c: c, ns: cfg.Namespace, kinds: newKindMapper(c), out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
	if f.namespace != "" {
		s.ns, s.nsSet = f.namespace, true
	}
	return s, nil
}

// resource is the dynamic client of a mapping, in ns when namespaced.
func (s *session) resource(m *meta.RESTMapping, ns string) dynamic.ResourceInterface {
	r := s.c.Dynamic().Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return r.Namespace(ns)
	}
	return r
}

// warnf prints a non-fatal problem the way main prints fatal ones.
func (s *session) warnf(format string, args ...any) {
	fmt.Fprintf(s.errOut, "error: "+format+"\n", args...)
}

func namespaced(m *meta.RESTMapping) bool {
	return m.Scope.Name() == meta.RESTScopeNameNamespace
}

// kindName is how kubectl names an object in messages: "pod/a",
// "resourceclaim.resource.k8s.io/c".
func kindName(m *meta.RESTMapping, name string) string {
	return qualifiedKind(m) + "/" + name
}

func qualifiedKind(m *meta.RESTMapping) string {
	k := strings.ToLower(m.GroupVersionKind.Kind)
	if g := m.GroupVersionKind.Group; g != "" {
		k += "." + g
	}
	return k
}

// qualifiedResource is "pods" or "resourceclaims.resource.k8s.io".
func qualifiedResource(m *meta.RESTMapping) string {
	r := m.Resource.Resource
	if g := m.Resource.Group; g != "" {
		r += "." + g
	}
	return r
}
