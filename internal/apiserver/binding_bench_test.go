package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

// BenchmarkBindClaim is the binding of a pod with one claim, allocated
// by the binding, as the scheduler sends it (the claim's resourceVersion,
// a structured allocation, its fence), through the whole handler: the
// seed form (a resource.k8s.io/v1alpha2 claim) against the v1 form. The
// claims and pods are created before the timer starts, and the watch
// cache holds every claim before the first binding, so each binding reads
// what the scheduler's would. B/op and allocs/op include etcd's and the
// watch cache's share of the binding's two writes.
func BenchmarkBindClaim(b *testing.B) {
	s, st := benchServer(b)
	h := s.Handler()
	serve := func(b *testing.B, method, path, body string, want int) []byte {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "bench/1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
		}
		return rec.Body.Bytes()
	}
	const pods = "/api/v1/namespaces/default/pods"
	serve(b, "POST", "/api/v1/nodes", string(mustJSONb(makeNode("n1", nil))), 201)
	seedAlloc := string(mustJSONb(structuredAlloc("n1", "gpu.example.com", "gpu-0")))
	v1Alloc := string(mustJSONb(resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"}}},
		NodeSelector: &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchFields: []kcorev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: kcorev1.NodeSelectorOpIn, Values: []string{"n1"}}}}}},
	}))
	forms := []struct {
		name, claims, alloc string
		claim               func(name string) any
		ck                  *kind
	}{
		{"seed", path2("default", "resourceclaims"), seedAlloc, func(n string) any {
			c := makeClaim(n, "gpu.example.com")
			c.Labels = map[string]string{"app": "demo"}
			return c
		}, s.reg.get(gvrOf(resourcev1alpha2.SchemeGroupVersion, "resourceclaims"))},
		{"v1", path1("default", "resourceclaims"), v1Alloc, func(n string) any { return v1Claim(n) },
			s.reg.get(gvrOf(resourcev1.SchemeGroupVersion, "resourceclaims"))},
	}
	var seq int
	for _, f := range forms {
		b.Run(f.name, func(b *testing.B) {
			seq++
			names := make([]string, b.N)
			rvs := make([]string, b.N)
			for i := range b.N {
				names[i] = fmt.Sprintf("b-%s-%d-%d", f.name, seq, i)
				var meta struct {
					Metadata struct{ ResourceVersion string } `json:"metadata"`
				}
				if err := json.Unmarshal(serve(b, "POST", f.claims, string(mustJSONb(f.claim(names[i]))), 201), &meta); err != nil {
					b.Fatal(err)
				}
				rvs[i] = meta.Metadata.ResourceVersion
				serve(b, "POST", pods, string(mustJSONb(makePod(names[i]).claim(names[i]).obj())), 201)
			}
			waitCached(b, s, f.ck, names[b.N-1], rvs[b.N-1])
			bodies := make([]string, b.N)
			for i := range b.N {
				rev, err := st.CurrentRevision(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				binding := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: "n1"},
					ResourceClaims: []corev1.BindingResourceClaim{{Name: names[i], ResourceVersion: rvs[i],
						DriverName: "gpu.example.com", Allocation: &runtime.RawExtension{Raw: []byte(f.alloc)}}},
					AllocationFences: []corev1.AllocationFence{{NodeName: "n1", DriverName: "gpu.example.com", Revision: strconv.FormatInt(rev+int64(2*b.N), 10)}}}
				binding.APIVersion, binding.Kind = "v1", "Binding"
				bodies[i] = string(mustJSONb(binding))
			}
			b.ReportAllocs()
			b.ResetTimer()
			c0 := processCPU()
			for i := range b.N {
				serve(b, "POST", pods+"/"+names[i]+"/binding", bodies[i], 201)
			}
			reportCPU(b, c0)
		})
	}
}

// waitCached waits until the watch cache holds claim name at revision rv.
func waitCached(b *testing.B, s *Server, k *kind, name, rv string) {
	for {
		obj, err := s.cachedGet(context.Background(), k, "default", name)
		if err == nil {
			if r, _ := revisionOf(obj); strconv.FormatInt(r, 10) == rv {
				return
			}
		}
		select {
		case <-s.ctx.Done():
			b.Fatal("server stopped")
		case <-time.After(time.Millisecond):
		}
	}
}
