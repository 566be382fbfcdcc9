package apiserver

import (
	"context"
	"strings"
	"testing"

	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourcev1ac "k8s.io/client-go/applyconfigurations/resource/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// gpuClaimApply is an applied configuration of a v1 claim of one GPU.
func gpuClaimApply(name, ns string) *resourcev1ac.ResourceClaimApplyConfiguration {
	return resourcev1ac.ResourceClaim(name, ns).WithSpec(resourcev1ac.ResourceClaimSpec().WithDevices(
		resourcev1ac.DeviceClaim().WithRequests(resourcev1ac.DeviceRequest().WithName("gpu").WithExactly(
			resourcev1ac.ExactDeviceRequest().WithDeviceClassName("gpu.example.com")))))
}

// managers maps each manager of obj's managedFields to its operation
// (and subresource, after a slash).
func managers(obj metav1.Object) map[string]string {
	out := map[string]string{}
	for _, e := range obj.GetManagedFields() {
		op := string(e.Operation)
		if e.Subresource != "" {
			op += "/" + e.Subresource
		}
		out[e.Manager] = op
	}
	return out
}

// ownsField reports whether manager's entry names the field path (as
// structured-merge-diff writes it, e.g. `f:team`).
func ownsField(obj metav1.Object, manager, field string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), field) {
			return true
		}
	}
	return false
}

// The typed clients' Apply over JSON and protobuf: create by apply,
// conflicts naming the other manager and field, force moving ownership,
// a configuration that drops a field others own leaving it, updates
// recorded under their manager, managedFields cleared by an update,
// dry run.
func TestApplyTypedClient(t *testing.T) {
	for _, proto := range []bool{false, true} {
		name := "json"
		if proto {
			name = "protobuf"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			claims := v1Client(t, "admin", proto).ResourceClaims(ns)

			c, err := claims.Apply(ctx, gpuClaimApply("a", ns).WithLabels(map[string]string{"team": "x"}), metav1.ApplyOptions{FieldManager: "m1"})
			if err != nil || c.Labels["team"] != "x" || managers(c)["m1"] != "Apply" || !ownsField(c, "m1", `"f:team"`) {
				t.Fatalf("create by apply: %v %+v", err, c)
			}

			_, err = claims.Apply(ctx, resourcev1ac.ResourceClaim("a", ns).WithLabels(map[string]string{"team": "y"}), metav1.ApplyOptions{FieldManager: "m2"})
			if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `"m1"`) || !strings.Contains(err.Error(), ".metadata.labels.team") {
				t.Fatalf("conflicting apply: %v, want 409 naming m1 and .metadata.labels.team", err)
			}
			c, err = claims.Apply(ctx, resourcev1ac.ResourceClaim("a", ns).WithLabels(map[string]string{"team": "y"}), metav1.ApplyOptions{FieldManager: "m2", Force: true})
			if err != nil || c.Labels["team"] != "y" || !ownsField(c, "m2", `"f:team"`) || ownsField(c, "m1", `"f:team"`) {
				t.Fatalf("forced apply: %v %+v", err, c.ManagedFields)
			}
			// m1 no longer owns the label: its configuration without it
			// leaves it.
			if c, err = claims.Apply(ctx, gpuClaimApply("a", ns), metav1.ApplyOptions{FieldManager: "m1"}); err != nil || c.Labels["team"] != "y" {
				t.Fatalf("re-apply without the label: %v %+v", err, c)
			}

			c.Labels["other"] = "1"
			c, err = claims.Update(ctx, c, metav1.UpdateOptions{FieldManager: "editor"})
			if err != nil || managers(c)["editor"] != "Update" || !ownsField(c, "editor", `"f:other"`) {
				t.Fatalf("update: %v %+v", err, c)
			}
			// A single empty entry (what typed clients can send; [] is
			// omitted) clears managedFields.
			c.ManagedFields = []metav1.ManagedFieldsEntry{{}}
			if c, err = claims.Update(ctx, c, metav1.UpdateOptions{}); err != nil || len(c.ManagedFields) != 0 {
				t.Fatalf("update clearing managedFields: %v %+v", err, c.ManagedFields)
			}

			dry, err := claims.Apply(ctx, gpuClaimApply("dry", ns), metav1.ApplyOptions{FieldManager: "m1", DryRun: []string{metav1.DryRunAll}})
			if err != nil || dry.Name != "dry" || managers(dry)["m1"] != "Apply" {
				t.Fatalf("dry-run apply: %v %+v", err, dry)
			}
			if _, err := claims.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("dry-run apply stored the claim: %v", err)
			}
		})
	}
}

// Over plain HTTP: `managedFields: []` in an update clears them, a create
// and an update record the User-Agent's product when no fieldManager is
// given, and the refusals name what is wrong.
func TestApplyRequests(t *testing.T) {
	ns := newNamespace(t)
	pods := "/api/v1/namespaces/" + ns + "/pods"
	applied := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    app: a\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
	expect(t, admin(t, "PATCH", pods+"/p?fieldManager=m", applied, "Content-Type", applyPatchType), 201, `"manager":"m"`, `"operation":"Apply"`)
	expect(t, admin(t, "PATCH", pods+"/p?fieldManager=m", applied, "Content-Type", applyPatchType), 200)
	expect(t, admin(t, "PATCH", pods+"/p", `{"metadata":{"labels":{"b":"1"}}}`, "Content-Type", mergePatchType, "User-Agent", "tool/1.0 (linux)"),
		200, `"manager":"tool"`, `"operation":"Update"`)

	var p corev1.Pod
	admin(t, "GET", pods+"/p", nil).into(t, &p)
	raw := strings.Replace(string(mustJSON(t, p)), `"metadata":{`, `"metadata":{"managedFields":[],`, 1)
	raw = strings.Replace(raw, `"managedFields":[{`, `"unused":[{`, 1) // drop the stored entries: the [] above stays
	var m map[string]any
	resp{body: []byte(raw)}.into(t, &m)
	delete(m["metadata"].(map[string]any), "unused")
	r := admin(t, "PUT", pods+"/p", mustJSON(t, m))
	expect(t, r, 200)
	if strings.Contains(string(r.body), `"managedFields"`) {
		t.Fatalf("managedFields: [] did not clear them: %s", r.body)
	}

	// A claim stored as v1alpha2 is applied through v1alpha2 only.
	expect(t, admin(t, "POST", path2(ns, "resourceclaims"), makeClaim("seed", "gpu")), 201)
	viewApply := `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"seed","labels":{"a":"1"}}}`
	expect(t, admin(t, "PATCH", path1(ns, "resourceclaims")+"/seed?fieldManager=m", viewApply, "Content-Type", applyPatchType), 400, "resource.k8s.io/v1alpha2")
	expect(t, admin(t, "PATCH", path2(ns, "resourceclaims")+"/seed?fieldManager=m", strings.Replace(viewApply, "resource.k8s.io/v1", "resource.k8s.io/v1alpha2", 1),
		"Content-Type", applyPatchType), 200, `"a":"1"`)

	for _, tc := range []struct {
		name, path, ct, body string
		code                 int
		want                 string
	}{
		{"no fieldManager", pods + "/p", applyPatchType, applied, 422, "fieldManager: Required value"},
		{"force on a merge patch", pods + "/p?force=true", mergePatchType, `{}`, 422, "force: Forbidden"},
		{"fieldManager too long", pods + "/p?fieldManager=" + strings.Repeat("m", 129), mergePatchType, `{}`, 422, "fieldManager"},
		{"other version", pods + "/p?fieldManager=m", applyPatchType, strings.Replace(applied, "apiVersion: v1", "apiVersion: v2", 1), 400, "v2"},
		{"other name", pods + "/p?fieldManager=m", applyPatchType, strings.Replace(applied, "name: p", "name: q", 1), 400, "does not match"},
		{"unknown field", pods + "/p?fieldManager=m", applyPatchType, applied + "  bogus: 1\n", 400, "bogus"},
		{"managedFields in the configuration", pods + "/p?fieldManager=m", applyPatchType,
			strings.Replace(applied, "  name: p\n", "  name: p\n  managedFields: [{manager: x}]\n", 1), 400, "managedFields"},
		{"status of a missing object", pods + "/missing/status?fieldManager=m", applyPatchType,
			strings.Replace(applied, "name: p", "name: missing", 1), 404, ""},
		{"not YAML", pods + "/p?fieldManager=m", applyPatchType, "a: [", 400, "YAML"},
		{"no kind", pods + "/p?fieldManager=m", applyPatchType, strings.Replace(applied, "kind: Pod\n", "", 1), 400, ""},
		{"a list", pods + "/p?fieldManager=m", applyPatchType, "- a\n", 400, "YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, admin(t, "PATCH", tc.path, tc.body, "Content-Type", tc.ct), tc.code, tc.want)
		})
	}
}

// Two drivers apply their own entries of one claim's status.devices (a
// list keyed by driver, pool, device and share ID): both are kept, each
// owned by its driver; a driver applying another's entry is refused as
// its update would be; a driver dropping its entry removes only its own.
func TestApplyStatusTwoDrivers(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ensureNode(t, "apply-n1")
	claim := v1Claim("shared")
	claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: "nic",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "nic.example.com"}})
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), claim), 201)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("p").claim("shared").obj()), 201)
	alloc := &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: "gpu.example.com", Pool: "apply-n1", Device: "gpu-0"},
			{Request: "nic", Driver: "nic.example.com", Pool: "apply-n1", Device: "nic-0"}}},
		NodeSelector: &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchFields: []kcorev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: kcorev1.NodeSelectorOpIn, Values: []string{"apply-n1"}}}}}},
	}
	b := bindingWith(t, "apply-n1", "", corev1.BindingResourceClaim{Name: "shared", Allocation: &runtime.RawExtension{Raw: mustJSON(t, alloc)}})
	rev := currentRev(t)
	b.AllocationFences = []corev1.AllocationFence{
		{NodeName: "apply-n1", DriverName: "gpu.example.com", Revision: rev}, {NodeName: "apply-n1", DriverName: "nic.example.com", Revision: rev}}
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods/p/binding", b), 201)

	entry := func(driver, device, reason string) *resourcev1ac.AllocatedDeviceStatusApplyConfiguration {
		return resourcev1ac.AllocatedDeviceStatus().WithDriver(driver).WithPool("apply-n1").WithDevice(device).WithConditions(
			metav1ac.Condition().WithType("Ready").WithStatus(metav1.ConditionTrue).WithReason(reason).WithMessage("").
				WithLastTransitionTime(metav1.Now()))
	}
	apply := func(token, driver string, entries ...*resourcev1ac.AllocatedDeviceStatusApplyConfiguration) (*resourcev1.ResourceClaim, error) {
		ac := resourcev1ac.ResourceClaim("shared", ns).WithStatus(resourcev1ac.ResourceClaimStatus().WithDevices(entries...))
		// The nic driver's client speaks protobuf, the gpu driver's JSON.
		return v1Client(t, token, token == "nicdriver").ResourceClaims(ns).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: driver, Force: true})
	}
	devices := func(c *resourcev1.ResourceClaim) string {
		var out []string
		for _, d := range c.Status.Devices {
			out = append(out, d.Driver+"/"+d.Device+"="+d.Conditions[0].Reason)
		}
		return strings.Join(out, ",")
	}

	if _, err := apply("driver", "gpu.example.com", entry("gpu.example.com", "gpu-0", "Prepared")); err != nil {
		t.Fatalf("gpu driver: %v", err)
	}
	c, err := apply("nicdriver", "nic.example.com", entry("nic.example.com", "nic-0", "Up"))
	if err != nil || devices(c) != "gpu.example.com/gpu-0=Prepared,nic.example.com/nic-0=Up" {
		t.Fatalf("nic driver: %v %s", err, devices(c))
	}
	if managers(c)["gpu.example.com"] != "Apply/status" || managers(c)["nic.example.com"] != "Apply/status" || c.Status.Allocation == nil {
		t.Fatalf("managers %v, allocation %v", managers(c), c.Status.Allocation)
	}
	if c, err = apply("driver", "gpu.example.com", entry("gpu.example.com", "gpu-0", "Healthy")); err != nil ||
		devices(c) != "gpu.example.com/gpu-0=Healthy,nic.example.com/nic-0=Up" {
		t.Fatalf("gpu driver again: %v %s", err, devices(c))
	}
	if _, err := apply("driver", "gpu.example.com", entry("gpu.example.com", "gpu-0", "Healthy"), entry("nic.example.com", "nic-0", "Down")); !apierrors.IsForbidden(err) {
		t.Fatalf("gpu driver applying the nic's entry: %v, want 403", err)
	}
	if c, err = apply("driver", "gpu.example.com"); err != nil || devices(c) != "nic.example.com/nic-0=Up" {
		t.Fatalf("gpu driver dropping its entry: %v %s", err, devices(c))
	}
}
