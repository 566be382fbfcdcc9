package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apiversion "k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"

	"allot.dev/allot/internal/version"
)

// serverVersionTimeout bounds the /version request of `allot version`.
const serverVersionTimeout = 30 * time.Second

// versionOutput is what `allot version -o json|yaml` prints: kubectl
// version's shape, each side in /version's shape.
type versionOutput struct {
	ClientVersion *apiversion.Info `json:"clientVersion,omitempty"`
	ServerVersion *apiversion.Info `json:"serverVersion,omitempty"`
}

func newVersionCommand() *cobra.Command {
	var cf clientFlags
	var clientOnly bool
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the allot version of this client and of the API server",
		Long: `Print the allot version of this client and, unless --client, of the API
server it is configured for, with the Kubernetes API level the server serves.
An unreachable server is an error, after the client's version.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", "json", "yaml":
			default:
				return fmt.Errorf("unknown output format %q (use json or yaml)", output)
			}
			client := version.Get()
			out := versionOutput{ClientVersion: &client}
			var serverErr error
			if !clientOnly {
				out.ServerVersion, serverErr = serverVersion(cmd, &cf)
			}
			if err := printVersion(cmd.OutOrStdout(), output, out); err != nil {
				return err
			}
			return serverErr
		},
	}
	cf.add(cmd)
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the client's version; do not contact the server")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml")
	return cmd
}

// serverVersion asks the API server of the command's kubeconfig for its
// /version.
func serverVersion(cmd *cobra.Command, cf *clientFlags) (*apiversion.Info, error) {
	s, err := cf.open(cmd)
	if err != nil {
		return nil, fmt.Errorf("server version: %w (--client prints only the client's)", err)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), serverVersionTimeout)
	defer cancel()
	info, err := s.c.Discovery().ServerVersionWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("server version: server %s: %w", s.c.RESTConfig().Host, err)
	}
	return info, nil
}

func printVersion(w io.Writer, format string, out versionOutput) error {
	var data []byte
	var err error
	switch format {
	case "json":
		data, err = json.MarshalIndent(out, "", "  ")
		data = append(data, '\n')
	case "yaml":
		data, err = yaml.Marshal(out)
	default:
		data = fmt.Appendf(nil, "Client Version: %s\n", allotVersionOf(out.ClientVersion))
		if sv := out.ServerVersion; sv != nil {
			data = fmt.Appendf(data, "Server Version: %s\nServer API Level: Kubernetes %s.%s\n", allotVersionOf(sv), sv.Major, sv.Minor)
		}
	}
	if err != nil {
		return fmt.Errorf("encode %s: %w", format, err)
	}
	_, err = w.Write(data)
	return err
}

// allotVersionOf is the allot version inside a /version answer; a server
// that is not allot's shows its gitVersion.
func allotVersionOf(info *apiversion.Info) string {
	if v, ok := version.FromGitVersion(info.GitVersion); ok {
		return v
	}
	return info.GitVersion
}
