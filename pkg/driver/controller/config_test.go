package controller

import (
	"strings"
	"testing"
	"time"

	"allot.dev/allot/pkg/client"
)

func TestConfigErrors(t *testing.T) {
	c := &client.Client{}
	tests := map[string]struct {
		cfg  Config
		want string
	}{
		"no client":         {Config{DriverName: "d.example.com"}, "client: required"},
		"no driver name":    {Config{Client: c}, "driverName: required"},
		"bad driver name":   {Config{Client: c, DriverName: "Not_A_Name"}, `driverName "Not_A_Name": must be a DNS subdomain`},
		"bad controller":    {Config{Client: c, DriverName: "d.example.com", ControllerName: "x..y"}, `controllerName "x..y"`},
		"negative workers":  {Config{Client: c, DriverName: "d.example.com", Workers: -1}, "workers: must not be negative"},
		"negative timeout":  {Config{Client: c, DriverName: "d.example.com", APITimeout: -time.Second}, "apiTimeout: must not be negative"},
		"retry delays":      {Config{Client: c, DriverName: "d.example.com", MinRetryDelay: time.Minute, MaxRetryDelay: time.Second}, "minRetryDelay 1m0s: must not exceed maxRetryDelay 1s"},
		"namespace+factory": {Config{Client: c, DriverName: "d.example.com", Namespace: "x", Factory: client.NewFactory(c, 0)}, "namespace: must be empty when a factory is given"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := tc.cfg.complete()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("complete() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := Config{Client: &client.Client{}, DriverName: "d.example.com"}.complete()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ControllerName != "d.example.com" || cfg.Workers != DefaultWorkers || cfg.APITimeout != DefaultAPITimeout ||
		cfg.DriverTimeout != DefaultDriverTimeout || cfg.MaxRetryDelay != DefaultMaxRetryDelay || cfg.Logger == nil {
		t.Errorf("defaults not filled: %+v", cfg)
	}
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "driver is nil") {
		t.Errorf("New(nil driver) = %v, want an error", err)
	}
}
