package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// structuredAlloc is a structured allocation of one instance on a node.
func structuredAlloc(node, driver, instance string) *resourcev1alpha2.AllocationResult {
	return &resourcev1alpha2.AllocationResult{
		ResourceHandles: []resourcev1alpha2.ResourceHandle{{
			DriverName: driver,
			StructuredData: &resourcev1alpha2.StructuredResourceHandle{
				NodeName: node,
				Partitionable: &resourcev1alpha2.PartitionableAllocationResult{
					Instances: []resourcev1alpha2.AllocatedResourceInstance{{ID: instance}},
				},
			},
		}},
		AvailableOnNodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}
}

func bindingWith(t *testing.T, node, fence string, claims ...corev1.BindingResourceClaim) *corev1.Binding {
	b := &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: node}, ResourceClaims: claims}
	b.APIVersion, b.Kind = "v1", "Binding"
	if fence != "" {
		b.AllocationFences = []corev1.AllocationFence{{NodeName: node, DriverName: "gpu.example.com", Revision: fence}}
	}
	return b
}

func allocClaim(t *testing.T, name, node, instance string) corev1.BindingResourceClaim {
	return corev1.BindingResourceClaim{Name: name, DriverName: "gpu.example.com",
		Allocation: &runtime.RawExtension{Raw: mustJSON(t, structuredAlloc(node, "gpu.example.com", instance))}}
}

func ensureNode(t *testing.T, name string) {
	r := admin(t, "POST", "/api/v1/nodes", makeNode(name, map[string]string{"rack": "a"}))
	if r.code != 201 && r.code != 409 {
		t.Fatalf("create node: %s", r)
	}
}

func currentRev(t *testing.T) string {
	rev, err := testStore.CurrentRevision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatInt(rev, 10)
}

func TestBindingCommitsNodeAllocationAndReservation(t *testing.T) {
	ns := newNamespace(t)
	ensureNode(t, "bind-n1")
	expect(t, admin(t, "POST", "/apis/resource.k8s.io/v1alpha2/namespaces/"+ns+"/resourceclaims", makeClaim("c1", "gpu")), 201)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("p1").claim("c1").obj()), 201)
	podPath := "/api/v1/namespaces/" + ns + "/pods/p1"

	// Claims of a binding must belong to the pod, and structured
	// allocations need a fence.
	expect(t, admin(t, "POST", podPath+"/binding", bindingWith(t, "bind-n1", "", allocClaim(t, "c1", "bind-n1", "gpu-0"))), 400, "allocationFences")
	expect(t, admin(t, "POST", podPath+"/binding", bindingWith(t, "bind-n1", currentRev(t), allocClaim(t, "other", "bind-n1", "gpu-0"))), 400, "does not use claim")

	expect(t, admin(t, "POST", podPath+"/binding", bindingWith(t, "bind-n1", currentRev(t), allocClaim(t, "c1", "bind-n1", "gpu-0"))), 201, `"resourceVersion"`)
	var pod corev1.Pod
	admin(t, "GET", podPath, nil).into(t, &pod)
	if pod.Spec.NodeName != "bind-n1" {
		t.Fatalf("pod not bound: %q", pod.Spec.NodeName)
	}
	var claim resourcev1alpha2.ResourceClaim
	admin(t, "GET", "/apis/resource.k8s.io/v1alpha2/namespaces/"+ns+"/resourceclaims/c1", nil).into(t, &claim)
	if claim.Status.Allocation == nil || len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != pod.UID ||
		claim.Status.DriverName != "gpu.example.com" || claim.Finalizers[0] != resourcev1alpha2.DeleteProtectionFinalizer {
		t.Fatalf("claim not allocated and reserved: %+v %v", claim.Status, claim.Finalizers)
	}
	// A second binding to another node is refused, whether the watch
	// cache already shows the first (refused at once) or not (the pod's
	// revision check fails and the retry on the pod it found refuses it).
	// It carries no claims: a claim the request gets wrong would be
	// refused for that first when the cached pod is stale.
	ensureNode(t, "bind-n2")
	expect(t, admin(t, "POST", podPath+"/binding", bindingWith(t, "bind-n2", "")), 409, "already assigned")
}

func TestStructuredAllocationOnlyThroughBinding(t *testing.T) {
	ns := newNamespace(t)
	path := "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/resourceclaims"
	var claim resourcev1alpha2.ResourceClaim
	admin(t, "POST", path, makeClaim("direct", "gpu")).into(t, &claim)
	claim.Status.DriverName = "gpu.example.com"
	claim.Status.Allocation = structuredAlloc("n1", "gpu.example.com", "gpu-0")
	expect(t, admin(t, "PUT", path+"/direct/status", &claim), 403, "only through the pods/binding")
}

// TestBindingRaceNeverDoubleAllocates: two writers, each with its own claim
// and pod, allocate the same instance on the same node from the same view,
// at the same time. Exactly one wins, every round.
func TestBindingRaceNeverDoubleAllocates(t *testing.T) {
	ns := newNamespace(t)
	ensureNode(t, "race-n1")
	for round := 0; round < 20; round++ {
		for _, w := range []string{"a", "b"} {
			c := fmt.Sprintf("c%d%s", round, w)
			expect(t, admin(t, "POST", "/apis/resource.k8s.io/v1alpha2/namespaces/"+ns+"/resourceclaims", makeClaim(c, "gpu")), 201)
			expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod(fmt.Sprintf("p%d%s", round, w)).claim(c).obj()), 201)
		}
		fence := currentRev(t)
		instance := fmt.Sprintf("gpu-%d", round)
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i, w := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b := bindingWith(t, "race-n1", fence, allocClaim(t, fmt.Sprintf("c%d%s", round, w), "race-n1", instance))
				codes[i] = admin(t, "POST", fmt.Sprintf("/api/v1/namespaces/%s/pods/p%d%s/binding", ns, round, w), b).code
			}()
		}
		wg.Wait()
		wins := 0
		for _, c := range codes {
			switch c {
			case 201:
				wins++
			case 409:
			default:
				t.Fatalf("round %d: unexpected code %d", round, c)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d writers won (codes %v), want exactly 1", round, wins, codes)
		}
	}
}

// A claim generated for a template entry of the pod (controlled by the
// pod, annotated with the entry) may be bound before the claim controller
// records it in the pod's status: the binding records it. A claim
// generated for another pod, or for an entry already recorded, may not.
func TestBindingRecordsGeneratedClaim(t *testing.T) {
	ns := newNamespace(t)
	ensureNode(t, "bind-g1")
	tmpl := "t"
	pod := makePod("p").obj()
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	r := admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", pod)
	expect(t, r, 201)
	r.into(t, pod)
	claimsPath := "/apis/resource.k8s.io/v1alpha2/namespaces/" + ns + "/resourceclaims"
	yes := true
	generated := func(name string, uid types.UID, entry string) *resourcev1alpha2.ResourceClaim {
		c := makeClaim(name, "gpu")
		c.Annotations = map[string]string{resourcev1alpha2.PodClaimNameAnnotation: entry}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: uid, Controller: &yes}}
		return c
	}
	expect(t, admin(t, "POST", claimsPath, generated("p-gpu-abcde", pod.UID, "gpu")), 201)
	expect(t, admin(t, "POST", claimsPath, generated("other-pods", "another-uid", "gpu")), 201)
	expect(t, admin(t, "POST", claimsPath, generated("other-entry", pod.UID, "fpga")), 201)
	podPath := "/api/v1/namespaces/" + ns + "/pods/p"
	for _, name := range []string{"other-pods", "other-entry"} {
		expect(t, admin(t, "POST", podPath+"/binding", bindingWith(t, "bind-g1", currentRev(t), allocClaim(t, name, "bind-g1", "gpu-0"))), 400, "does not use claim")
	}
	expect(t, admin(t, "POST", podPath+"/binding", bindingWith(t, "bind-g1", currentRev(t), allocClaim(t, "p-gpu-abcde", "bind-g1", "gpu-0"))), 201)
	var got corev1.Pod
	admin(t, "GET", podPath, nil).into(t, &got)
	if got.Spec.NodeName != "bind-g1" || len(got.Status.ResourceClaimStatuses) != 1 ||
		got.Status.ResourceClaimStatuses[0].Name != "gpu" || *got.Status.ResourceClaimStatuses[0].ResourceClaimName != "p-gpu-abcde" {
		t.Fatalf("bound pod: node %q, claim statuses %+v", got.Spec.NodeName, got.Status.ResourceClaimStatuses)
	}
	var claim resourcev1alpha2.ResourceClaim
	admin(t, "GET", claimsPath+"/p-gpu-abcde", nil).into(t, &claim)
	if claim.Status.Allocation == nil || len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != got.UID {
		t.Fatalf("claim not allocated and reserved: %+v", claim.Status)
	}
}
