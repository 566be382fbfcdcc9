package apiserver

import (
	"fmt"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

// BenchmarkTrackPodStatusWrite is the field manager's work for a node's
// pod status write (phase and a condition) of a pod with four
// containers: the whole objects compared, as the library is used
// plainly, and trackUpdate's comparison without the spec the write cannot
// change. Both record the same managedFields
// (TestTrackUpdateLeavesOutTheUnchangedPart).
func BenchmarkTrackPodStatusWrite(b *testing.B) {
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	p := makePod("bench").label("app", "web").obj()
	p.Namespace = "default"
	for _, c := range []string{"b", "c", "d"} {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox", Command: []string{"sleep", "3600"},
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}})
	}
	created, err := testAPI.trackUpdate(k, "", k.newObj(), p, "creator")
	if err != nil {
		b.Fatal(err)
	}
	live := created.(*corev1.Pod)
	next := live.DeepCopy()
	next.Status.Phase = corev1.PodRunning
	next.Status.Conditions = []corev1.PodCondition{{Type: "Ready", Status: "True"}}
	fm, err := k.fieldManager("status")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			fm.UpdateNoErrors(live, next.DeepCopy(), "node")
		}
	})
	b.Run("trackUpdate", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := testAPI.trackUpdate(k, "status", live, next.DeepCopy(), "node"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// reportCPU reports the process's CPU time per operation since c0 (the
// machine's other load moves it less than ns/op).
func reportCPU(b *testing.B, c0 time.Duration) {
	b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkTrackUpdate is the field manager's work (trackUpdate) for the
// writes BenchmarkDRA's objects see most, on objects with the
// managedFields of their earlier writers (TestComparedPartsGiveTheSameManagedFields's
// fixtures): a pod's creation, a label, a node's status write; a v1
// claim's device status and its reservation dropped.
func BenchmarkTrackUpdate(b *testing.B) {
	pods := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	claims := testAPI.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaims"))
	pod, claim := storedPod(b, pods), storedClaim(b, claims)
	p := func(f func(p *corev1.Pod)) runtime.Object { c := pod.DeepCopy(); f(c); return c }
	c := func(f func(c *resourcev1.ResourceClaim)) runtime.Object { x := claim.DeepCopy(); f(x); return x }
	for _, bc := range []struct {
		name      string
		k         *kind
		sub       string
		live, obj runtime.Object
	}{
		{"pod/create", pods, "", pods.newObj(), newPod()},
		{"pod/label", pods, "", pod, p(func(p *corev1.Pod) { p.Labels["c"] = "3" })},
		{"pod/status", pods, "status", pod, p(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "Ready", Status: "True"})
		})},
		// The claim controller's write of a template claim's name.
		{"pod/claimstatus", pods, "status", pod, p(func(p *corev1.Pod) {
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptrTo("cmp-gpu-x7k2p")}}
		})},
		{"claim/status", claims, "status", claim, c(func(c *resourcev1.ResourceClaim) { c.Status.Devices[0].Conditions[0].Reason = "Down" })},
		{"claim/unreserve", claims, "status", claim, c(func(c *resourcev1.ResourceClaim) { c.Status.ReservedFor = nil })},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			c0 := processCPU()
			for range b.N {
				if _, err := testAPI.trackUpdate(bc.k, bc.sub, bc.live, bc.obj.DeepCopyObject(), "writer"); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, c0)
		})
	}
	// Writes the update memo misses every time: a claim reserved for
	// another pod each time (reservedFor is keyed by the pod's uid).
	b.Run("claim/reserve-each", func(b *testing.B) {
		unreserved := claim.DeepCopy()
		unreserved.Status.ReservedFor = nil
		objs := make([]runtime.Object, 64)
		for i := range objs {
			x := unreserved.DeepCopy()
			x.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: fmt.Sprint("p", i), UID: types.UID(fmt.Sprint("uid-", i))}}
			objs[i] = x
		}
		b.ReportAllocs()
		c0 := processCPU()
		for i := range b.N {
			if _, err := testAPI.trackUpdate(claims, "status", unreserved, objs[i%len(objs)].DeepCopyObject(), "writer"); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, c0)
	})
	// A create as the create path tracks it: from the memo of the
	// field manager's answers for the pod's shape (fieldmanager_memo.go).
	created := newPod()
	b.Run("pod/create-memo", func(b *testing.B) {
		b.ReportAllocs()
		c0 := processCPU()
		for range b.N {
			if _, err := testAPI.trackCreate(pods, created.DeepCopyObject(), "writer"); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, c0)
	})
}
