package main

import (
	"log/slog"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"allot.dev/allot/pkg/client"
)

// addAPIServersFlag adds --api-servers: the API servers a component fails
// over between (pkg/client.WithFailover).
func addAPIServersFlag(f *pflag.FlagSet, servers *[]string) {
	f.StringSliceVar(servers, "api-servers", nil, "API server URLs to use, in order, moving to the next when one cannot be reached (default: the kubeconfig's server); they must share the kubeconfig's CA")
}

// componentREST loads a component's kubeconfig, points it at servers (if
// any) with failover between them, and logs write outages to log.
func componentREST(kubeconfig string, servers []string, log *slog.Logger) (*rest.Config, error) {
	rc, err := client.LoadRESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := client.WithFailover(rc, servers, log); err != nil {
		return nil, err
	}
	client.LogWriteOutages(rc, log)
	return rc, nil
}
