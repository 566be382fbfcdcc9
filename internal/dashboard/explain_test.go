package dashboard_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/dashboard"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/plugins/noderesources"
	"allot.dev/allot/internal/scheduler/schedtest"
)

func explain(t *testing.T, query, token string) (int, dashboard.ExplainResponse, []byte) {
	t.Helper()
	path := dashboard.ExplainPath
	if query != "" {
		path += "?" + query
	}
	resp, body := get(t, path, token)
	var out dashboard.ExplainResponse
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("decode explanation: %v: %s", err, body)
		}
	}
	return resp.StatusCode, out, body
}

func createPod(t *testing.T, b schedtest.PodBuilder, ns string) *corev1.Pod {
	t.Helper()
	p := b.Namespace(ns).Obj()
	p.UID = ""
	out, err := up.Admin.Pods(ns).Create(callCtx(t), p)
	if err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return out
}

// Explaining one pod, or every pending pod of a namespace, answers with
// the scheduler's verdict and every node's reasons, as `allot explain`.
func TestExplainPods(t *testing.T) {
	const ns = "explain-pods"
	createNamespace(t, ns)
	createNode(t, schedtest.MakeNode("explain-n1").Alloc("cpu", "2").Label("explain", "yes").Obj())
	createPod(t, schedtest.MakePod("big").Req("example.com/nothing", "1").Limit("example.com/nothing", "1"), ns)
	createPod(t, schedtest.MakePod("small").Req("cpu", "100m").NodeSelector("explain", "yes"), ns)
	eventually(t, "pod small bound", func() bool {
		p, err := up.Admin.Pods(ns).Get(callCtx(t), "small")
		return err == nil && p.Spec.NodeName == "explain-n1"
	})

	code, got, body := explain(t, "namespace="+ns+"&name=big", up.AdminToken)
	if code != http.StatusOK || len(got.Pods) != 1 {
		t.Fatalf("explain big: %d %s", code, body)
	}
	big := got.Pods[0]
	if big.Namespace != ns || big.Name != "big" || big.Node != "" || big.Verdict != "Unschedulable" {
		t.Errorf("explain big = %+v, want pending and Unschedulable", big)
	}
	if !strings.HasPrefix(big.Message, "0/") || !strings.Contains(big.Message, "Insufficient example.com/nothing") {
		t.Errorf("message %q, want the scheduler's summary", big.Message)
	}
	n1 := nodeVerdict(t, big, "explain-n1")
	if n1.Feasible || len(n1.Rejections) == 0 || n1.Rejections[0].Plugin != noderesources.Name ||
		!strings.Contains(n1.Rejections[0].Message, "Insufficient example.com/nothing") {
		t.Errorf("explain-n1 verdict %+v, want NodeResourcesFit: Insufficient example.com/nothing", n1)
	}

	// A bound pod is judged as if pending.
	code, got, body = explain(t, "namespace="+ns+"&name=small", up.AdminToken)
	if code != http.StatusOK || len(got.Pods) != 1 {
		t.Fatalf("explain small: %d %s", code, body)
	}
	if small := got.Pods[0]; small.Node != "explain-n1" || small.Verdict != "Success" || small.Selected != "explain-n1" ||
		!nodeVerdict(t, small, "explain-n1").Feasible {
		t.Errorf("explain small = %+v, want it to fit explain-n1", small)
	}

	// Without a name: the namespace's pending pods only.
	code, got, body = explain(t, "namespace="+ns, up.AdminToken)
	if code != http.StatusOK {
		t.Fatalf("explain %s: %d %s", ns, code, body)
	}
	if len(got.Pods) != 1 || got.Pods[0].Name != "big" || got.Truncated {
		t.Errorf("pending pods of %s = %s, want big alone", ns, body)
	}
	// Without a namespace: every namespace's.
	if _, got, body = explain(t, "", up.AdminToken); !hasPod(got, ns, "big") || hasPod(got, ns, "small") {
		t.Errorf("pending pods = %s, want %s/big and not %s/small", body, ns, ns)
	}

	if code, _, body := explain(t, "namespace="+ns+"&name=nobody", up.AdminToken); code != http.StatusNotFound {
		t.Errorf("explain a missing pod: %d %s, want 404", code, body)
	}
}

func nodeVerdict(t *testing.T, p dashboard.PodExplanation, node string) dashboard.NodeVerdict {
	t.Helper()
	for _, n := range p.Nodes {
		if n.Node == node {
			return n
		}
	}
	t.Fatalf("explanation of %s/%s has no entry for node %s: %+v", p.Namespace, p.Name, node, p.Nodes)
	return dashboard.NodeVerdict{}
}

func hasPod(r dashboard.ExplainResponse, ns, name string) bool {
	for _, p := range r.Pods {
		if p.Namespace == ns && p.Name == name {
			return true
		}
	}
	return false
}

// The endpoint reads with the caller's identity: a user (who may read
// everything) is served; a node, which may not list every kind explaining
// needs, gets the API server's 403.
func TestExplainUsesTheCallersIdentity(t *testing.T) {
	tokens := filepath.Join(up.DataDir, "tokens.csv")
	nodeToken := tokenOf(t, tokens, "local", auth.RoleNode)
	code, _, body := explain(t, "", nodeToken)
	if code != http.StatusForbidden {
		t.Fatalf("explain as node: %d %s, want 403", code, body)
	}
	if st := status(t, body); st.Reason != metav1.StatusReasonForbidden {
		t.Errorf("reason %q, want Forbidden", st.Reason)
	}

	userToken, err := auth.AppendToken(tokens, "dashboard-viewer", auth.RoleUser)
	if err != nil {
		t.Fatal(err)
	}
	// The API server reloads the tokens file when it changes.
	eventually(t, "the user token accepted", func() bool {
		code, _, _ := explain(t, "", userToken)
		return code == http.StatusOK
	})
}

// tokenOf finds the token of name and role in a tokens file.
func tokenOf(t *testing.T, path, name string, role auth.Role) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(strings.TrimSpace(line), ","); len(f) == 3 && f[1] == name && f[2] == string(role) {
			return f[0]
		}
	}
	t.Fatalf("no %s token for %s in %s", role, name, path)
	return ""
}

// An explained pod's v1 claims bring their devices with what the drivers
// wrote in status.devices, judged as `allot explain` judges them.
func TestExplainPodDevices(t *testing.T) {
	const ns, node, driver = "explain-devices", "explain-dev-n1", "nic.example.com"
	createNamespace(t, ns)
	createNode(t, schedtest.MakeNode(node).Alloc("cpu", "2").Label("explain-devices", "yes").Obj())
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-nics"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "nic-3"}}}}
	if _, err := up.Admin.ResourceSlices().Create(callCtx(t), slice); err != nil {
		t.Fatal(err)
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "explain-nics"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + driver + `"`}}}}}
	if _, err := up.Admin.DeviceClasses().Create(callCtx(t), class); err != nil {
		t.Fatal(err)
	}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "nic", Namespace: ns},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "nic",
			Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}}}}}
	if _, err := up.Admin.ResourceClaimsV1(ns).Create(callCtx(t), claim); err != nil {
		t.Fatal(err)
	}
	createPod(t, schedtest.MakePod("uses-nic").NodeSelector("explain-devices", "yes").Claim("nic", "nic"), ns)
	var allocated *resourcev1.ResourceClaim
	eventually(t, "claim nic allocated", func() bool {
		c, err := up.Admin.ResourceClaimsV1(ns).Get(callCtx(t), "nic")
		allocated = c
		return err == nil && c.Status.Allocation != nil
	})
	allocated.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: driver, Pool: node, Device: "nic-3",
		Conditions:  []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "LinkDown", LastTransitionTime: metav1.Now()}},
		NetworkData: &resourcev1.NetworkDeviceData{InterfaceName: "net1"}}}
	if _, err := up.Admin.ResourceClaimsV1(ns).UpdateStatus(callCtx(t), allocated); err != nil {
		t.Fatal(err)
	}

	code, got, body := explain(t, "namespace="+ns+"&name=uses-nic", up.AdminToken)
	if code != http.StatusOK || len(got.Pods) != 1 {
		t.Fatalf("explain: %d %s", code, body)
	}
	devs := got.Pods[0].Devices
	if len(devs) != 1 || devs[0].Claim != "nic" || devs[0].Device != "nic-3" || devs[0].State != scheduler.DeviceFailing ||
		!strings.Contains(devs[0].Why, "Ready is False: LinkDown") || devs[0].Interface != "net1" {
		t.Errorf("devices %+v, want nic-3 failing (Ready is False: LinkDown) on net1", devs)
	}
}
