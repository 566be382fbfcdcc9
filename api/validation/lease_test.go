package validation

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLease(t *testing.T) {
	lease := func(f func(*coordinationv1.LeaseSpec)) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "allot-scheduler"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr("host_1"), LeaseDurationSeconds: ptr[int32](15), LeaseTransitions: ptr[int32](0)}}
		if f != nil {
			f(&l.Spec)
		}
		return l
	}
	for name, tc := range map[string]struct {
		lease *coordinationv1.Lease
		want  string // empty: valid
	}{
		"valid":                {lease: lease(nil)},
		"empty spec":           {lease: lease(func(s *coordinationv1.LeaseSpec) { *s = coordinationv1.LeaseSpec{} })},
		"zero duration":        {lease: lease(func(s *coordinationv1.LeaseSpec) { s.LeaseDurationSeconds = ptr[int32](0) }), want: "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"},
		"negative transitions": {lease: lease(func(s *coordinationv1.LeaseSpec) { s.LeaseTransitions = ptr[int32](-1) }), want: "spec.leaseTransitions: Invalid value: -1"},
		"long holder":          {lease: lease(func(s *coordinationv1.LeaseSpec) { s.HolderIdentity = ptr(strings.Repeat("h", 1025)) }), want: "spec.holderIdentity: Too long"},
		"unknown strategy": {lease: lease(func(s *coordinationv1.LeaseSpec) {
			s.Strategy = ptr[coordinationv1.CoordinatedLeaseStrategy]("Newest")
		}), want: "spec.strategy: Unsupported value"},
		"holder w/o strategy": {lease: lease(func(s *coordinationv1.LeaseSpec) { s.PreferredHolder = ptr("b") }), want: "spec.preferredHolder: Forbidden"},
		"holder with strategy": {lease: lease(func(s *coordinationv1.LeaseSpec) {
			s.PreferredHolder = ptr("b")
			s.Strategy = ptr(coordinationv1.OldestEmulationVersion)
		})},
		"bad name": {lease: func() *coordinationv1.Lease { l := lease(nil); l.Name = "Not_A_Name"; return l }(), want: "metadata.name: Invalid value"},
	} {
		t.Run(name, func(t *testing.T) {
			errs := Validate(tc.lease)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("valid lease refused: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Fatalf("errors %v, want one containing %q", errs.ToAggregate(), tc.want)
			}
		})
	}
	old := lease(nil)
	upd := lease(func(s *coordinationv1.LeaseSpec) {
		s.HolderIdentity = ptr("host_2")
		s.LeaseTransitions = ptr[int32](1)
	})
	if errs := ValidateUpdate(upd, old); len(errs) > 0 {
		t.Fatalf("takeover refused: %v", errs.ToAggregate())
	}
	renamed := upd.DeepCopy()
	renamed.Name = "other"
	if errs := ValidateUpdate(renamed, old); len(errs) == 0 {
		t.Fatal("renaming a lease accepted")
	}
}
