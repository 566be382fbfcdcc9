package node

import (
	"errors"
	"strings"
	"testing"

	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/pkg/client"
)

func TestUnhealthyDevicePolicy(t *testing.T) {
	rt, err := fake.New(fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := func(p UnhealthyDevicePolicy) Config {
		return Config{NodeName: "n", Client: &client.Client{}, Runtime: rt, UnhealthyDevicePolicy: p,
			DevicePluginDir: t.TempDir(), PluginsRegistryDir: t.TempDir()}
	}
	tests := map[UnhealthyDevicePolicy]int{"": 2, UnhealthyDeviceFailPod: 2, UnhealthyDeviceReport: 0}
	for policy, monitors := range tests {
		t.Run(string(policy), func(t *testing.T) {
			a, err := New(base(policy))
			if err != nil {
				t.Fatal(err)
			}
			h := a.podCfg.Hooks
			if len(h.HealthReporters) != 2 || len(h.Monitors) != monitors {
				t.Fatalf("%d health reporters and %d monitors, want 2 and %d", len(h.HealthReporters), len(h.Monitors), monitors)
			}
		})
	}
	_, err = New(base("Evict"))
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `unhealthy device policy "Evict"`) {
		t.Fatalf("New with policy Evict = %v, want ErrInvalidConfig naming the policy", err)
	}
}
