package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"allot.dev/allot/pkg/client"
)

func TestDefaultKubeconfigPath(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	if got := client.DefaultKubeconfigPath(); got != "" {
		t.Fatalf("without a record: %q, want empty", got)
	}
	if _, err := client.LoadConfig(""); !errors.Is(err, client.ErrNoKubeconfig) {
		t.Fatalf("LoadConfig without a kubeconfig: err = %v, want ErrNoKubeconfig", err)
	}
	record, err := client.LastKubeconfigRecord()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(record, []byte(cluster.Kubeconfig+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := client.DefaultKubeconfigPath(); got != cluster.Kubeconfig {
		t.Fatalf("from the record: %q, want %q", got, cluster.Kubeconfig)
	}
	t.Setenv("KUBECONFIG", "/from/env")
	if got := client.DefaultKubeconfigPath(); got != "/from/env" {
		t.Fatalf("with $KUBECONFIG: %q", got)
	}
}

func TestLoadConfigNamespace(t *testing.T) {
	cfg, err := client.LoadConfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if cfg.Namespace != "default" || cfg.REST.Host != cluster.URL || cfg.REST.BearerToken == "" {
		t.Fatalf("config: namespace %q host %q token set %v", cfg.Namespace, cfg.REST.Host, cfg.REST.BearerToken != "")
	}
}
