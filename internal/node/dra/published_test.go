package dra

import (
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
	drapb "allot.dev/allot/api/dra/v1alpha1"
	"allot.dev/allot/internal/node/dra/dratest"
)

func (e *env) claimUID(name string) types.UID {
	e.t.Helper()
	c, err := e.admin.ResourceClaims(e.ns).Get(callCtx(e.t), name)
	if err != nil {
		e.t.Fatalf("get claim %s: %v", name, err)
	}
	return c.UID
}

// nodePrepared reads whether the Node lists the claim as prepared for
// the pod.
func (e *env) nodePrepared(claimUID, podUID types.UID) bool {
	e.t.Helper()
	n, err := e.admin.Nodes().Get(callCtx(e.t), e.node)
	if err != nil {
		e.t.Fatalf("get node: %v", err)
	}
	return n.Status.PreparedFor(claimUID, podUID)
}

// TestPreparedClaimsPublishedAroundDriverCalls: the Node lists a claim
// as prepared for a pod before the driver is asked to prepare it, and
// stops listing it only after the driver unprepared it.
func TestPreparedClaimsPublishedAroundDriverCalls(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	pod := e.readyPod("p", "gpu", gpuDriver)
	claimUID := e.claimUID("gpu")
	var mu sync.Mutex
	var atPrepare, atUnprepare []bool
	p.OnPrepare(func(req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
		listed := e.nodePrepared(claimUID, pod.UID)
		mu.Lock()
		atPrepare = append(atPrepare, listed)
		mu.Unlock()
		resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
		for _, c := range req.GetClaims() {
			resp.Claims[c.GetUid()] = &drapb.NodePrepareResourceResponse{CdiDevices: []string{dratest.DeviceFor(c.GetName())}}
		}
		return resp, nil
	})
	p.OnUnprepare(func(req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
		listed := e.nodePrepared(claimUID, pod.UID)
		mu.Lock()
		atUnprepare = append(atUnprepare, listed)
		mu.Unlock()
		resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
		for _, c := range req.GetClaims() {
			resp.Claims[c.GetUid()] = &drapb.NodeUnprepareResourceResponse{}
		}
		return resp, nil
	})
	wantAdmitted(t, admit(t, m, pod))
	if !e.nodePrepared(claimUID, pod.UID) {
		t.Fatal("the Node does not list the prepared claim")
	}
	if err := release(t, m, pod); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mu.Lock()
	if len(atPrepare) != 1 || !atPrepare[0] {
		t.Errorf("listed at prepare calls: %v, want [true] (listed before the driver is called)", atPrepare)
	}
	if len(atUnprepare) != 1 || !atUnprepare[0] {
		t.Errorf("listed at unprepare calls: %v, want [true] (still listed while the driver unprepares)", atUnprepare)
	}
	mu.Unlock()
	eventually(t, "the Node stops listing the unprepared claim", func() (bool, string) {
		return !e.nodePrepared(claimUID, pod.UID), "still listed"
	})
}

// TestDeletedPodNotPrepared: a pod deleted before its claims are prepared
// (the agent's view lags behind) is not prepared for: the agent reads it
// after listing the claims, finds it gone, and holds it; its release
// removes the listing.
func TestDeletedPodNotPrepared(t *testing.T) {
	e := newEnv(t)
	m := e.start()
	p := e.plugin(m, gpuDriver)
	pod := e.readyPod("p", "gpu", gpuDriver)
	claimUID := e.claimUID("gpu")
	zero := int64(0)
	if err := e.admin.Pods(e.ns).Delete(callCtx(t), "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// Node-bound pods wait for their agent: complete the deletion as it would.
	if err := e.nc.Pods(e.ns).Delete(callCtx(t), "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Logf("second delete: %v", err)
	}
	wantHold(t, admit(t, m, pod), ReasonPodGone, "no longer in the API server")
	if n := len(p.Prepared()); n != 0 {
		t.Fatalf("%d prepare calls for a deleted pod, want 0", n)
	}
	if err := release(t, m, pod); err != nil {
		t.Fatalf("Release: %v", err)
	}
	eventually(t, "the Node stops listing the claim", func() (bool, string) {
		return !e.nodePrepared(claimUID, pod.UID), "still listed"
	})
	var n *corev1.Node
	n, _ = e.admin.Nodes().Get(callCtx(t), e.node)
	if len(n.Status.PreparedResourceClaims) != 0 {
		t.Fatalf("node lists %+v", n.Status.PreparedResourceClaims)
	}
}
