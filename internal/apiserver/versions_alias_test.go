package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	resourcev1alpha3client "k8s.io/client-go/kubernetes/typed/resource/v1alpha3"
	resourcev1beta2client "k8s.io/client-go/kubernetes/typed/resource/v1beta2"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// aliasConfig is a client config of the test server as admin; protobuf
// bodies as Kubernetes' typed clients may send them.
func aliasConfig(protobuf bool) *rest.Config {
	cfg := &rest.Config{Host: testSrv.URL, BearerToken: "admin"}
	if protobuf {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	return cfg
}

// DeviceTaintRule in three versions, one stored object: created through
// v1beta2 (protobuf body) it is read through v1 and v1alpha3; updated
// through v1alpha3, the change shows in v1; its status written through
// v1beta2 shows in v1; a watch through v1alpha3 sees v1's writes in its
// own version; deleted through v1alpha3, it is gone in all.
func TestDeviceTaintRuleVersions(t *testing.T) {
	ctx := context.Background()
	beta, err := resourcev1beta2client.NewForConfig(aliasConfig(true))
	if err != nil {
		t.Fatal(err)
	}
	alpha, err := resourcev1alpha3client.NewForConfig(aliasConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	v1 := v1Client(t, "admin", false).DeviceTaintRules()
	name := fmt.Sprintf("versions-%d", time.Now().UnixNano())
	created, err := beta.DeviceTaintRules().Create(ctx, &resourcev1beta2.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1beta2.DeviceTaintRuleSpec{DeviceSelector: &resourcev1beta2.DeviceTaintSelector{Driver: ptr.To("gpu.example.com")},
			Taint: resourcev1beta2.DeviceTaint{Key: "example.com/health", Value: "bad", Effect: resourcev1beta2.DeviceTaintEffectNoExecute}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create through v1beta2: %v", err)
	}
	if created.APIVersion != "" && created.APIVersion != "resource.k8s.io/v1beta2" || created.Spec.Taint.TimeAdded == nil {
		t.Fatalf("created: %+v", created)
	}
	got, err := v1.Get(ctx, name, metav1.GetOptions{})
	if err != nil || got.Spec.Taint.Effect != resourcev1.DeviceTaintEffectNoExecute || got.UID != created.UID || *got.Spec.DeviceSelector.Driver != "gpu.example.com" {
		t.Fatalf("read through v1: %+v, %v", got, err)
	}
	// The raw answer of each version names that version.
	for _, ver := range []string{"v1", "v1beta2", "v1alpha3"} {
		r := admin(t, "GET", "/apis/resource.k8s.io/"+ver+"/devicetaintrules/"+name, nil)
		expect(t, r, 200, `"apiVersion":"resource.k8s.io/`+ver+`"`, `"kind":"DeviceTaintRule"`, `"effect":"NoExecute"`)
		r = admin(t, "GET", "/apis/resource.k8s.io/"+ver+"/devicetaintrules", nil)
		expect(t, r, 200, `"apiVersion":"resource.k8s.io/`+ver+`"`, `"kind":"DeviceTaintRuleList"`, `"name":"`+name+`"`)
	}
	w, err := alpha.DeviceTaintRules().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatalf("watch through v1alpha3: %v", err)
	}
	defer w.Stop()
	a, err := alpha.DeviceTaintRules().Get(ctx, name, metav1.GetOptions{})
	if err != nil || a.Spec.Taint.Key != "example.com/health" {
		t.Fatalf("read through v1alpha3: %+v, %v", a, err)
	}
	a.Spec.Taint.Value = "worse"
	if _, err := alpha.DeviceTaintRules().Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update through v1alpha3: %v", err)
	}
	if got, err := v1.Get(ctx, name, metav1.GetOptions{}); err != nil || got.Spec.Taint.Value != "worse" {
		t.Fatalf("v1 after the v1alpha3 update: %+v, %v", got, err)
	}
	b, err := beta.DeviceTaintRules().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Status.Conditions = []metav1.Condition{{Type: "EvictionInProgress", Status: metav1.ConditionFalse, Reason: "NotStarted", LastTransitionTime: metav1.Now()}}
	if _, err := beta.DeviceTaintRules().UpdateStatus(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status through v1beta2: %v", err)
	}
	if got, err := v1.Get(ctx, name, metav1.GetOptions{}); err != nil || len(got.Status.Conditions) != 1 {
		t.Fatalf("v1 after the v1beta2 status update: %+v, %v", got, err)
	}
	// A merge patch through v1beta2.
	if _, err := beta.DeviceTaintRules().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"via":"beta"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch through v1beta2: %v", err)
	}
	seen := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for !seen["worse"] || !seen["labelled"] {
		select {
		case ev := <-w.ResultChan():
			r, ok := ev.Object.(*resourcev1alpha3.DeviceTaintRule)
			if !ok || ev.Type != watch.Modified {
				t.Fatalf("watch event %v %T", ev.Type, ev.Object)
			}
			if r.Spec.Taint.Value == "worse" {
				seen["worse"] = true
			}
			if r.Labels["via"] == "beta" {
				seen["labelled"] = true
			}
		case <-deadline:
			t.Fatalf("watch through v1alpha3 saw %v", seen)
		}
	}
	if err := alpha.DeviceTaintRules().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete through v1alpha3: %v", err)
	}
	if _, err := v1.Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Fatal("the rule is still there through v1")
	}
	// Validation is v1's, through any version.
	_, err = alpha.DeviceTaintRules().Create(ctx, &resourcev1alpha3.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name + "-bad"},
		Spec: resourcev1alpha3.DeviceTaintRuleSpec{Taint: resourcev1alpha3.DeviceTaint{Key: "a b", Effect: "NoExecute"}}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.taint.key") {
		t.Fatalf("invalid rule through v1alpha3: %v, want 422 naming spec.taint.key", err)
	}
}

// Discovery lists the DeviceTaintRule versions, v1 preferred.
func TestDeviceTaintRuleVersionsDiscovery(t *testing.T) {
	var g metav1.APIGroup
	r := admin(t, "GET", "/apis/resource.k8s.io", nil)
	expect(t, r, 200)
	r.into(t, &g)
	var vers []string
	for _, v := range g.Versions {
		vers = append(vers, v.Version)
	}
	if g.PreferredVersion.Version != "v1" || strings.Join(vers, ",") != "v1,v1beta2,v1alpha3,v1alpha2" {
		t.Fatalf("resource.k8s.io versions %v, preferred %s", vers, g.PreferredVersion.Version)
	}
	for _, ver := range []string{"v1beta2", "v1alpha3"} {
		var list metav1.APIResourceList
		r := admin(t, "GET", "/apis/resource.k8s.io/"+ver, nil)
		expect(t, r, 200)
		r.into(t, &list)
		var names []string
		for _, res := range list.APIResources {
			names = append(names, res.Name+"="+res.Kind)
		}
		if strings.Join(names, ",") != "devicetaintrules=DeviceTaintRule,devicetaintrules/status=DeviceTaintRule" {
			t.Errorf("%s resources: %v", ver, names)
		}
		// Other kinds are not served in these versions.
		expect(t, admin(t, "GET", "/apis/resource.k8s.io/"+ver+"/resourceslices", nil), 404)
	}
}

// kubectl applies, reads and deletes DeviceTaintRules in each version.
func TestKubectlDeviceTaintRuleVersions(t *testing.T) {
	kubectlBin(t)
	name := fmt.Sprintf("kubectl-versions-%d", time.Now().UnixNano())
	manifest := func(ver, value string) string {
		return `apiVersion: resource.k8s.io/` + ver + `
kind: DeviceTaintRule
metadata: {name: ` + name + `}
spec:
  deviceSelector: {driver: gpu.example.com}
  taint: {key: example.com/health, value: ` + value + `, effect: NoExecute}
`
	}
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, code := kubectl(t, "default", stdin, args...)
		if code != 0 {
			t.Fatalf("kubectl %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	run(manifest("v1alpha3", "a"), "apply", "-f", "-")
	run(manifest("v1beta2", "b"), "apply", "-f", "-")
	// Server-side apply takes the field over from client-side apply's
	// manager, which conflicts as in Kubernetes.
	run(manifest("v1", "c"), "apply", "--server-side", "--force-conflicts", "-f", "-")
	run(manifest("v1beta2", "d"), "apply", "--server-side", "--force-conflicts", "-f", "-")
	for _, ver := range []string{"v1", "v1beta2", "v1alpha3"} {
		out := run("", "get", "devicetaintrules."+ver+".resource.k8s.io", name, "-o", "jsonpath={.apiVersion} {.spec.taint.value}")
		if out != "resource.k8s.io/"+ver+" d" {
			t.Errorf("kubectl get in %s: %q", ver, out)
		}
		if out := run("", "get", "devicetaintrules."+ver+".resource.k8s.io"); !strings.Contains(out, name) {
			t.Errorf("kubectl get list in %s:\n%s", ver, out)
		}
	}
	run("", "delete", "devicetaintrules.v1alpha3.resource.k8s.io", name)
	// The OpenAPI documents describe each version.
	for _, ver := range []string{"v1beta2", "v1alpha3"} {
		out := run("", "explain", "devicetaintrules.spec.taint", "--api-version=resource.k8s.io/"+ver)
		if !strings.Contains(out, "VERSION:    "+ver) || !strings.Contains(out, "timeAdded") {
			t.Errorf("kubectl explain in %s:\n%s", ver, out)
		}
	}
}

// A driver writes DeviceTaintRules for its own devices through v1alpha3,
// as Intel's Gaudi driver does, and no other rule.
func TestDriverTaintRuleThroughV1alpha3(t *testing.T) {
	ctx := context.Background()
	cfg := aliasConfig(false)
	cfg.BearerToken = "driver" // gpu.example.com
	c, err := resourcev1alpha3client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rule := func(name, driver string) *resourcev1alpha3.DeviceTaintRule {
		return &resourcev1alpha3.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1alpha3.DeviceTaintRuleSpec{DeviceSelector: &resourcev1alpha3.DeviceTaintSelector{Driver: ptr.To(driver), Device: ptr.To("gpu-3")},
				Taint: resourcev1alpha3.DeviceTaint{Key: "example.com/unhealthy", Effect: resourcev1alpha3.DeviceTaintEffectNoExecute}}}
	}
	name := fmt.Sprintf("driver-rule-%d", time.Now().UnixNano())
	if _, err := c.DeviceTaintRules().Create(ctx, rule(name, "gpu.example.com"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the driver tainting its own device: %v", err)
	}
	if _, err := c.DeviceTaintRules().Create(ctx, rule(name+"-other", "nic.example.com"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the driver tainting another driver's device: %v, want 403", err)
	}
	if err := c.DeviceTaintRules().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("the driver deleting its rule: %v", err)
	}
}
