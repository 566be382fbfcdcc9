package apiserver

import (
	"testing"

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
