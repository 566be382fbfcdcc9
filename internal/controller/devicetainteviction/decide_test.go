package devicetainteviction

import (
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func secs(n int64) *int64 { return &n }

// TestEvictionTime: per device, a NoExecute taint comes due at timeAdded
// plus the shortest seconds of the matching tolerations; never when they
// all lack seconds; other effects never evict; the pod goes at the
// earliest due over its devices.
func TestEvictionTime(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	taint := func(key string, effect resourcev1.DeviceTaintEffect, at time.Time) Taint {
		return Taint{DeviceTaint: resourcev1.DeviceTaint{Key: key, Effect: effect, TimeAdded: &metav1.Time{Time: at}}}
	}
	tol := func(key string, s *int64) resourcev1.DeviceToleration {
		return resourcev1.DeviceToleration{Key: key, Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute, TolerationSeconds: s}
	}
	for name, tc := range map[string]struct {
		taints map[string][]Taint // by device
		tols   map[string][]resourcev1.DeviceToleration
		want   time.Duration // after t0
		never  bool
	}{
		"no taint":                  {never: true},
		"NoSchedule does not evict": {taints: map[string][]Taint{"a": {taint("k", resourcev1.DeviceTaintEffectNoSchedule, t0)}}, never: true},
		"None does not evict":       {taints: map[string][]Taint{"a": {taint("k", resourcev1.DeviceTaintEffectNone, t0)}}, never: true},
		"untolerated: at timeAdded": {taints: map[string][]Taint{"a": {taint("k", "NoExecute", t0.Add(time.Minute))}}, want: time.Minute},
		"other key not tolerated": {taints: map[string][]Taint{"a": {taint("k", "NoExecute", t0)}},
			tols: map[string][]resourcev1.DeviceToleration{"a": {tol("other", nil)}}},
		"forever": {taints: map[string][]Taint{"a": {taint("k", "NoExecute", t0)}},
			tols: map[string][]resourcev1.DeviceToleration{"a": {tol("k", nil)}}, never: true},
		"shortest seconds win over forever": {taints: map[string][]Taint{"a": {taint("k", "NoExecute", t0)}},
			tols: map[string][]resourcev1.DeviceToleration{"a": {tol("k", nil), tol("k", secs(30)), tol("", secs(60))}}, want: 30 * time.Second},
		"negative seconds: at once": {taints: map[string][]Taint{"a": {taint("k", "NoExecute", t0)}},
			tols: map[string][]resourcev1.DeviceToleration{"a": {tol("k", secs(-5))}}},
		"tolerations are per device": {taints: map[string][]Taint{"a": {taint("k", "NoExecute", t0)}, "b": {taint("k", "NoExecute", t0)}},
			tols: map[string][]resourcev1.DeviceToleration{"a": {tol("k", nil)}, "b": {tol("k", secs(10))}}, want: 10 * time.Second},
		"earliest over taints": {taints: map[string][]Taint{"a": {taint("k", "NoExecute", t0.Add(time.Hour)), taint("j", "NoExecute", t0.Add(time.Minute))}},
			want: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			uses := []DeviceUse{{Driver: "d", Pool: "p", Device: "a", Tolerations: tc.tols["a"]}, {Driver: "d", Pool: "p", Device: "b", Tolerations: tc.tols["b"]}}
			due, evict := EvictionTime(uses, func(u DeviceUse) []Taint { return tc.taints[u.Device] }, t0)
			if evict == tc.never {
				t.Fatalf("evict = %v, want %v (%v)", evict, !tc.never, due)
			}
			if evict && !due.At.Equal(t0.Add(tc.want)) {
				t.Fatalf("due at %v, want %v", due.At, t0.Add(tc.want))
			}
		})
	}
}
