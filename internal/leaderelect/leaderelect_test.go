package leaderelect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	ok := Config{Enabled: true, LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		Namespace: "kube-system", Name: "allot-scheduler"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("the smallest valid timers refused: %v", err)
	}
	for name, tc := range map[string]struct {
		change func(*Config)
		want   string
	}{
		"lease under a second":     {func(c *Config) { c.LeaseDuration = 900 * time.Millisecond }, "--leader-elect-lease-duration 900ms: must be at least 1s"},
		"renew not under lease":    {func(c *Config) { c.RenewDeadline = time.Second }, "must be greater than --leader-elect-renew-deadline 1s"},
		"retry too close to renew": {func(c *Config) { c.RetryPeriod = 450 * time.Millisecond }, "must be greater than 1.2 × --leader-elect-retry-period 450ms"},
		"no lease name":            {func(c *Config) { c.Name = "" }, "--leader-elect-resource-name: required"},
		"negative retry":           {func(c *Config) { c.RetryPeriod = -time.Second }, "must be positive"},
	} {
		t.Run(name, func(t *testing.T) {
			c := ok
			tc.change(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
	off := Config{LeaseDuration: time.Millisecond}
	if err := off.Validate(); err != nil {
		t.Fatalf("timers of a disabled election checked: %v", err)
	}
}

// With leader election off, Run runs the component at once and returns
// its error.
func TestRunDisabled(t *testing.T) {
	boom := errors.New("boom")
	err := Run(context.Background(), nil, Config{}, nil, nil, func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want the component's", err)
	}
}
