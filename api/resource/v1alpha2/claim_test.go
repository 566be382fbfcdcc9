package v1alpha2

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestGeneratedFor(t *testing.T) {
	yes := true
	claim := func(uid types.UID, kind string, controller bool, annotated bool) *ResourceClaim {
		c := &ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: kind, Name: "p", UID: uid}}}}
		if controller {
			c.OwnerReferences[0].Controller = &yes
		}
		if annotated {
			c.Annotations = map[string]string{PodClaimNameAnnotation: "gpu"}
		}
		return c
	}
	if uid, entry, ok := GeneratedFor(claim("u1", "Pod", true, true)); !ok || uid != "u1" || entry != "gpu" {
		t.Fatalf("generated claim: %q %q %v", uid, entry, ok)
	}
	for name, c := range map[string]*ResourceClaim{
		"no annotation":        claim("u1", "Pod", true, false),
		"owner not controller": claim("u1", "Pod", false, true),
		"owner not a pod":      claim("u1", "Job", true, true),
		"owner without a UID":  claim("", "Pod", true, true),
	} {
		if _, _, ok := GeneratedFor(c); ok {
			t.Errorf("%s: taken for a generated claim", name)
		}
	}
}
