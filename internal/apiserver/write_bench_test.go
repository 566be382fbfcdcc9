package apiserver

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
)

// BenchmarkWrite is one write of each kind BenchmarkDRA's objects see,
// through the whole handler (decode, field manager, validation,
// admission, encode, etcd transaction, and the watch cache's decode of
// the event), one at a time. Its B/op and allocs/op do not depend on
// the machine's load, unlike its ns/op; they include etcd's and the
// watch cache's share, which every write pays too.
//
// Each operation changes the object (a label, a condition, an entry of
// status.devices numbered by the iteration), so every one takes the
// field manager's full path.
func BenchmarkWrite(b *testing.B) {
	s, st := benchServer(b)
	h := s.Handler()
	serve := func(b *testing.B, method, path, ct, body string, want int) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("User-Agent", "bench/1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
		}
	}
	const (
		js    = "application/json"
		merge = "application/merge-patch+json"
		apply = "application/apply-patch+yaml"
		pods  = "/api/v1/namespaces/default/pods"
	)
	claims := path1("default", "resourceclaims")
	// Each run of a sub-benchmark (Go runs each more than once) writes
	// objects of its own, obj(name, i) for its i-th write: a ring of
	// them, so that the watch cache has seen a write before the next
	// write of the same object reads it (a stale read would retry, and
	// the numbers would depend on timing).
	const ring = 32
	var seq int
	obj := func(name string, i int) string { return fmt.Sprintf("%s-%d-%d", name, seq, i%ring) }
	run := func(name string, setup func(b *testing.B, i int), op func(b *testing.B, i int)) {
		b.Run(name, func(b *testing.B) {
			seq++
			if setup != nil {
				for i := range ring {
					setup(b, i)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := processCPU()
			for i := range b.N {
				op(b, i)
			}
			reportCPU(b, c0)
		})
	}
	podJSON := func(name string, i int) string {
		p := writeBenchPod(name)
		p.Labels = map[string]string{"app": "web", "i": fmt.Sprint(i)}
		return string(mustJSONb(p))
	}
	run("pod/create", nil, func(b *testing.B, i int) {
		serve(b, "POST", pods, js, podJSON(fmt.Sprintf("c-%d-%d", seq, i), i), 201)
	})
	run("pod/update", func(b *testing.B, i int) {
		serve(b, "POST", pods, js, podJSON(obj("u", i), 0), 201)
	}, func(b *testing.B, i int) {
		serve(b, "PUT", pods+"/"+obj("u", i), js, podJSON(obj("u", i), i+1), 200)
	})
	run("pod/patch", func(b *testing.B, i int) {
		serve(b, "POST", pods, js, podJSON(obj("p", i), 0), 201)
	}, func(b *testing.B, i int) {
		serve(b, "PATCH", pods+"/"+obj("p", i), merge, fmt.Sprintf(`{"metadata":{"labels":{"i":"%d"}}}`, i+1), 200)
	})
	run("pod/status", func(b *testing.B, i int) {
		serve(b, "POST", pods, js, podJSON(obj("s", i), 0), 201)
	}, func(b *testing.B, i int) {
		serve(b, "PATCH", pods+"/"+obj("s", i)+"/status", merge, fmt.Sprintf(
			`{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","message":"%d"}]}}`, i), 200)
	})
	// The claim controller's write of a template claim's name into the
	// pod's status (a PUT of pods/status, as client-go's UpdateStatus).
	templated := func(name string) *corev1.Pod {
		p := writeBenchPod(name)
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("gpu-template")}}
		return p
	}
	run("pod/claimstatus", func(b *testing.B, i int) {
		serve(b, "POST", pods, js, string(mustJSONb(templated(obj("r", i)))), 201)
	}, func(b *testing.B, i int) {
		p := templated(obj("r", i))
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptrTo(fmt.Sprintf("%s-gpu-%d", obj("r", i), i))}}
		serve(b, "PUT", pods+"/"+obj("r", i)+"/status", js, string(mustJSONb(p)), 200)
	})
	// A delete of a pod with the managedFields of its create and of a
	// status write: removed at once (not bound), as the benchmark's and
	// the node agent's final deletes. Each deletes a pod of its own,
	// written before the timer starts.
	b.Run("pod/delete", func(b *testing.B) {
		seq++
		for i := range b.N {
			serve(b, "POST", pods, js, podJSON(fmt.Sprintf("d-%d-%d", seq, i), 0), 201)
			serve(b, "PATCH", pods+"/"+fmt.Sprintf("d-%d-%d", seq, i)+"/status", merge, `{"status":{"phase":"Running"}}`, 200)
		}
		b.ReportAllocs()
		b.ResetTimer()
		c0 := processCPU()
		for i := range b.N {
			serve(b, "DELETE", pods+"/"+fmt.Sprintf("d-%d-%d", seq, i), js, "", 200)
		}
		reportCPU(b, c0)
	})
	applyPod := func(b *testing.B, i, label, code int) {
		serve(b, "PATCH", pods+"/"+obj("a", i)+"?fieldManager=bench", apply, fmt.Sprintf(
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","labels":{"i":"%d"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, obj("a", i), label), code)
	}
	run("pod/apply", func(b *testing.B, i int) { applyPod(b, i, 0, 201) }, func(b *testing.B, i int) { applyPod(b, i, i+1, 200) })
	claimJSON := func(name string, i int) string {
		c := v1Claim(name)
		c.Labels["i"] = fmt.Sprint(i)
		return string(mustJSONb(c))
	}
	run("claim/create", nil, func(b *testing.B, i int) {
		serve(b, "POST", claims, js, claimJSON(fmt.Sprintf("c-%d-%d", seq, i), i), 201)
	})
	// The seed form's claim, as the claim controller makes it from a
	// v1alpha2 template.
	run("claim/create-v1alpha2", nil, func(b *testing.B, i int) {
		c := makeClaim(fmt.Sprintf("c2-%d-%d", seq, i), "gpu.example.com")
		c.Labels = map[string]string{"app": "demo", "i": fmt.Sprint(i)}
		serve(b, "POST", path2("default", "resourceclaims"), js, string(mustJSONb(c)), 201)
	})
	run("claim/update", func(b *testing.B, i int) {
		serve(b, "POST", claims, js, claimJSON(obj("u", i), 0), 201)
	}, func(b *testing.B, i int) {
		serve(b, "PUT", claims+"/"+obj("u", i), js, claimJSON(obj("u", i), i+1), 200)
	})
	// allocated creates a claim and allocates it on node n1 through a
	// pod's binding, as the scheduler does.
	allocated := func(base string) func(b *testing.B, i int) {
		return func(b *testing.B, i int) {
			name := obj(base, i)
			serve(b, "POST", claims, js, claimJSON(name, 0), 201)
			pod := makePod(name).claim(name).obj()
			serve(b, "POST", pods, js, string(mustJSONb(pod)), 201)
			alloc := resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
					{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}}},
				NodeSelector: &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchFields: []kcorev1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: kcorev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}},
			}
			rev, err := st.CurrentRevision(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			binding := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: "n1"},
				ResourceClaims:   []corev1.BindingResourceClaim{{Name: name, Allocation: &runtime.RawExtension{Raw: mustJSONb(alloc)}}},
				AllocationFences: []corev1.AllocationFence{{NodeName: "n1", DriverName: "gpu.example.com", Revision: strconv.FormatInt(rev, 10)}}}
			binding.APIVersion, binding.Kind = "v1", "Binding"
			serve(b, "POST", pods+"/"+name+"/binding", js, string(mustJSONb(binding)), 201)
		}
	}
	serve(b, "POST", "/api/v1/nodes", js, string(mustJSONb(makeNode("n1", nil))), 201)
	run("claim/status", allocated("s"), func(b *testing.B, i int) {
		serve(b, "PATCH", claims+"/"+obj("s", i)+"/status", merge, fmt.Sprintf(
			`{"status":{"devices":[{"driver":"gpu.example.com","pool":"n1","device":"gpu-0","conditions":[{"type":"Ready","status":"True","reason":"Up","message":"%d","lastTransitionTime":"2026-01-01T00:00:00Z"}]}]}}`, i), 200)
	})
	run("claim/applystatus", allocated("as"), func(b *testing.B, i int) {
		serve(b, "PATCH", claims+"/"+obj("as", i)+"/status?fieldManager=gpu.example.com&force=true", apply, fmt.Sprintf(
			`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"%s"},"status":{"devices":[{"driver":"gpu.example.com","pool":"n1","device":"gpu-0","conditions":[{"type":"Ready","status":"True","reason":"Up","message":"%d","lastTransitionTime":"2026-01-01T00:00:00Z"}]}]}}`, obj("as", i), i), 200)
	})
}

// writeBenchPod is bench's benchPod: one container with requests.
func writeBenchPod(name string) *corev1.Pod {
	p := makePod(name).obj()
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")}
	return p
}
