package apiserver

import (
	"math"
	"math/big"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A claim with count 2^63-1 used to wrap the quota's usage (1 + 2^63-1)
// to a negative number clamped to 0, so claims ran past the limit. Count
// is now at most AllocationResultsMaxSize, refused with 422 naming it.
func TestClaimQuotaCannotBeOverflowed(t *testing.T) {
	ns := newNamespace(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"gpu.example.com.deviceclass.resource.k8s.io/devices": mustQuantity("4"),
	}}}
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/resourcequotas", quota), 201)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("one")), 201)
	for _, count := range []int64{math.MaxInt64, math.MaxInt64 - 1, resourcev1.AllocationResultsMaxSize + 1} {
		huge := v1Claim("huge")
		huge.Spec.Devices.Requests[0].Exactly.Count = count
		expect(t, admin(t, "POST", path1(ns, "resourceclaims"), huge), 422, "spec.devices.requests[0].exactly.count", "must be at most 32")
		first := v1Claim("first")
		r := &first.Spec.Devices.Requests[0]
		r.FirstAvailable = []resourcev1.DeviceSubRequest{{Name: "a", DeviceClassName: r.Exactly.DeviceClassName,
			AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}}
		r.Exactly = nil
		expect(t, admin(t, "POST", path1(ns, "resourceclaims"), first), 422, "spec.devices.requests[0].firstAvailable[0].count")
	}
	// The limit holds: three more devices fit, the fifth does not.
	three := v1Claim("three")
	three.Spec.Devices.Requests[0].Exactly.Count = 3
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), three), 201)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("five")), 403, "exceeded quota")
	var q corev1.ResourceQuota
	admin(t, "GET", "/api/v1/namespaces/"+ns+"/resourcequotas/q", nil).into(t, &q)
	if u := q.Status.Used["gpu.example.com.deviceclass.resource.k8s.io/devices"]; u.Value() != 4 {
		t.Fatalf("devices used = %s, want 4", u.String())
	}
}

// FuzzQuotaArithmetic: charging and releasing amounts of any size never
// wraps; the decision and the new usage are those of exact (math/big)
// arithmetic, the usage saturating at 2^63-1 only where a charge is
// refused anyway (the limit is at most 2^63-1).
func FuzzQuotaArithmetic(f *testing.F) {
	f.Add(int64(1), int64(4), int64(math.MaxInt64), int64(1), int64(-1))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(-math.MaxInt64), int64(1))
	f.Add(int64(0), int64(0), int64(0), int64(-5), int64(math.MaxInt64))
	f.Add(int64(3), int64(4), int64(1), int64(1), int64(1))
	f.Fuzz(func(t *testing.T, used, hard, d1, d2, d3 int64) {
		used, hard = max(used, 0), max(hard, 0)
		if d1 == math.MinInt64 || d2 == math.MinInt64 || d3 == math.MinInt64 {
			return // deltas are ± an amount (0..2^63-1)
		}
		for _, d := range []int64{d1, d2, d3} {
			ref := new(big.Int).Add(big.NewInt(used), big.NewInt(d))
			if ref.Sign() < 0 {
				ref.SetInt64(0)
			}
			refOK := d <= 0 || ref.Cmp(big.NewInt(hard)) <= 0
			next, ok := chargeAmount(used, hard, d)
			if ok != refOK {
				t.Fatalf("charge %d on %d of %d: ok=%v, exactly %v", d, used, hard, ok, refOK)
			}
			if next < 0 {
				t.Fatalf("charge %d on %d: usage %d", d, used, next)
			}
			if ok && big.NewInt(next).Cmp(ref) != 0 {
				t.Fatalf("charge %d on %d of %d: usage %d, exactly %s", d, used, hard, next, ref)
			}
			if ok {
				used = next
			}
		}
		// A claim's amounts per class sum without wrapping.
		c := &resourcev1.ResourceClaim{}
		for _, n := range []int64{d1, d2, d3} {
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourcev1.DeviceRequest{Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: n}})
		}
		amounts, _ := claimQuotaAmounts(c)
		ref := new(big.Int)
		for _, n := range []int64{d1, d2, d3} {
			ref.Add(ref, big.NewInt(max(n, 1)))
		}
		if ref.Cmp(big.NewInt(math.MaxInt64)) > 0 {
			ref.SetInt64(math.MaxInt64)
		}
		if got := amounts[deviceClassQuotaName("gpu")]; big.NewInt(got).Cmp(ref) != 0 {
			t.Fatalf("counts %d, %d, %d: %d devices, exactly %s (saturated)", d1, d2, d3, got, ref)
		}
	})
}
