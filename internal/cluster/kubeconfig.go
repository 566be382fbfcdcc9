package cluster

import (
	"allot.dev/allot/internal/atomicfile"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"allot.dev/allot/pkg/client"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig for the server with a bearer token.
func WriteKubeconfig(path, server, token string, caPEM []byte) error {
	return WriteUserKubeconfig(path, server, "admin", token, caPEM)
}

// WriteUserKubeconfig writes a kubeconfig for the server whose user,
// named user, authenticates with a bearer token.
func WriteUserKubeconfig(path, server, user, token string, caPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["allot"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["allot"] = &clientcmdapi.Context{Cluster: "allot", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "allot"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create kubeconfig dir: %w", err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// KubeconfigFor writes to path a kubeconfig with the server and CA of the
// kubeconfig at from (its current context's cluster) and a bearer token
// for user.
func KubeconfigFor(path, from, user, token string) error {
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return fmt.Errorf("read the cluster's kubeconfig: %w", err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster] == nil {
		return fmt.Errorf("kubeconfig %s has no current context with a cluster", from)
	}
	c := cfg.Clusters[ctx.Cluster]
	ca := c.CertificateAuthorityData
	if len(ca) == 0 && c.CertificateAuthority != "" {
		if ca, err = os.ReadFile(c.CertificateAuthority); err != nil {
			return fmt.Errorf("read the cluster's CA: %w", err)
		}
	}
	return WriteUserKubeconfig(path, c.Server, user, token, ca)
}

// RememberKubeconfig records path as the last `allot up`'s kubeconfig, where
// client.DefaultKubeconfigPath finds it.
func RememberKubeconfig(path string) error {
	f, err := client.LastKubeconfigRecord()
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("resolve kubeconfig path: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return fmt.Errorf("create config dir: %w", err)
	}
	return os.WriteFile(f, []byte(abs+"\n"), 0o600)
}
