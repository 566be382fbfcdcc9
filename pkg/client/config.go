package client

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Default client-side rate limits. client-go's own defaults (5 QPS, burst
// 10) are sized for kubectl; allot's scheduler and controllers issue many
// more requests, and the API server protects itself.
const (
	DefaultQPS   = 100
	DefaultBurst = 200
)

// ErrNoKubeconfig is returned when no kubeconfig path was given and none
// could be found.
var ErrNoKubeconfig = errors.New("no kubeconfig: pass --kubeconfig, set $KUBECONFIG, or start a cluster with `allot up`")

// DefaultKubeconfigPath is $KUBECONFIG when set, else the kubeconfig that
// the last `allot up` on this machine recorded, else "".
func DefaultKubeconfigPath() string {
	if env := os.Getenv("KUBECONFIG"); env != "" {
		return env
	}
	f, err := LastKubeconfigRecord()
	if err != nil {
		return ""
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// LastKubeconfigRecord is the file in which `allot up` records the path of
// its kubeconfig: USER-CONFIG-DIR/allot/last-kubeconfig.
func LastKubeconfigRecord() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find config dir: %w", err)
	}
	return filepath.Join(dir, "allot", "last-kubeconfig"), nil
}

// Config is what a kubeconfig says about the current context.
type Config struct {
	// REST connects to the API server.
	REST *rest.Config
	// Namespace is the context's namespace, "default" when unset.
	Namespace string
	// Path is the kubeconfig file (or $KUBECONFIG-style list) it came from.
	Path string
}

// LoadConfig reads a kubeconfig. An empty path means DefaultKubeconfigPath.
// A path holding several files separated by the OS list separator is merged
// as kubectl merges $KUBECONFIG.
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		path = DefaultKubeconfigPath()
	}
	if path == "" {
		return nil, ErrNoKubeconfig
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	if files := filepath.SplitList(path); len(files) > 1 {
		rules = &clientcmd.ClientConfigLoadingRules{Precedence: files}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("read namespace of kubeconfig %s: %w", path, err)
	}
	if ns == "" {
		ns = "default"
	}
	if rc.QPS == 0 {
		rc.QPS = DefaultQPS
	}
	if rc.Burst == 0 {
		rc.Burst = DefaultBurst
	}
	return &Config{REST: rc, Namespace: ns, Path: path}, nil
}

// LoadRESTConfig reads a kubeconfig (empty path: DefaultKubeconfigPath) and
// returns the connection settings of its current context.
func LoadRESTConfig(path string) (*rest.Config, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	return cfg.REST, nil
}

// NewForKubeconfig builds a Client from a kubeconfig file (empty path:
// DefaultKubeconfigPath).
func NewForKubeconfig(path string) (*Client, error) {
	rc, err := LoadRESTConfig(path)
	if err != nil {
		return nil, err
	}
	return NewForConfig(rc)
}
