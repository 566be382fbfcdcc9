package engine

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestV1Consumed pins the rounding of a request by a capacity's
// requestPolicy (upstream's calculateConsumedCapacity and
// violatesPolicy), on the milli-unit path and, for amounts beyond it,
// the exact one.
func TestV1Consumed(t *testing.T) {
	q := resource.MustParse
	pq := func(s string) *resource.Quantity { v := q(s); return &v }
	rng := func(min, step, max string) *resourcev1.CapacityRequestPolicy {
		r := &resourcev1.CapacityRequestPolicyRange{Min: pq(min)}
		if step != "" {
			r.Step = pq(step)
		}
		if max != "" {
			r.Max = pq(max)
		}
		return &resourcev1.CapacityRequestPolicy{Default: pq(min), ValidRange: r}
	}
	values := &resourcev1.CapacityRequestPolicy{Default: pq("8Gi"), ValidValues: []resource.Quantity{q("8Gi"), q("16Gi"), q("32Gi")}}
	for _, tc := range []struct {
		name, value, req string // req "" is no request value
		policy           *resourcev1.CapacityRequestPolicy
		want             string // "" does not fit the policy
	}{
		{"no policy, no request: all", "100G", "", nil, "100G"},
		{"no policy: as asked", "100G", "45G", nil, "45G"},
		{"default without request", "100G", "", rng("10G", "10G", ""), "10G"},
		{"below min", "100G", "1G", rng("10G", "10G", ""), "10G"},
		{"up to the step", "100G", "45G", rng("10G", "10G", ""), "50G"},
		{"on the step", "100G", "50G", rng("10G", "10G", ""), "50G"},
		{"no step: as asked", "100G", "45G", rng("10G", "", ""), "45G"},
		{"above max", "100G", "61G", rng("10G", "10G", "60G"), ""},
		{"max itself", "100G", "60G", rng("10G", "10G", "60G"), "60G"},
		{"fractional", "4", "600m", rng("500m", "250m", "2"), "750m"},
		{"fractional to a whole", "4", "900m", rng("500m", "250m", "2"), "1"},
		{"fractional above max", "4", "2100m", rng("500m", "250m", "2"), ""},
		{"valid values up", "64Gi", "9Gi", values, "16Gi"},
		{"valid value itself", "64Gi", "32Gi", values, "32Gi"},
		{"above every valid value", "64Gi", "33Gi", values, ""},
		{"milli-units beyond the fast path", "1e18", "25e14", rng("1e15", "1e15", ""), "3e15"},
		{"units when the bounds pass milli-units", "1e18", "25e16", rng("1e17", "1e17", ""), "3e17"},
		{"beyond int64 units: upstream cannot represent it", "1e30", "25e19", rng("1e20", "1e20", ""), ""},
		{"a request finer than a milli-unit on a milli range", "4", "600001u", rng("500m", "250m", "2"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dc := &resourcev1.DeviceCapacity{Value: q(tc.value), RequestPolicy: tc.policy}
			var req *resource.Quantity
			if tc.req != "" {
				req = pq(tc.req)
			}
			got, ok := v1Consumed(req, dc)
			switch {
			case tc.want == "" && ok:
				t.Errorf("consumes %s, want: breaks the policy", got.String())
			case tc.want != "" && !ok:
				t.Errorf("breaks the policy, want %s", tc.want)
			case tc.want != "" && got.Cmp(q(tc.want)) != 0:
				t.Errorf("consumes %s, want %s", got.String(), tc.want)
			}
		})
	}
}

// TestV1CapacityUnits: a capacity finer than a milli-unit is exact (its
// units go down to nano), so a share of all of it fits, and one a
// nano-unit more does not; a huge capacity still sums without wrapping.
func TestV1CapacityUnits(t *testing.T) {
	for _, tc := range []struct {
		value, share string
		fits         bool
	}{
		{"1.0001", "1.0001", true},
		{"1.0001", "1.000100001", false},
		{"100G", "100G", true},
		{"1e30", "5e29", true},
		{"1e30", "1e30", true},
	} {
		caps := v1Caps(map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"x": {Value: resource.MustParse(tc.value)}})
		q := resource.MustParse(tc.share)
		if got := caps[0].amount(&q) <= caps[0].total; got != tc.fits {
			t.Errorf("capacity %s, share %s: fits %v, want %v (units 10^%d, total %d)", tc.value, tc.share, got, tc.fits, caps[0].scale, caps[0].total)
		}
	}
}
