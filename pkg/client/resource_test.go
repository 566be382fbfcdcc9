package client_test

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
)

func TestTypedCRUD(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	pods := c.Pods(ns)

	created, err := pods.Create(ctx, makePod("a").label("app", "web").obj())
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.Namespace != ns {
		t.Fatalf("created pod lacks server metadata: %+v", created.ObjectMeta)
	}
	if _, err := pods.Create(ctx, makePod("a").obj()); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: err = %v, want AlreadyExists", err)
	}
	got, err := pods.Get(ctx, "a")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Labels["app"] != "web" || got.Status.Phase != corev1.PodPending {
		t.Fatalf("got labels %v phase %q", got.Labels, got.Status.Phase)
	}
	got.Labels["tier"] = "front"
	updated, err := pods.Update(ctx, got)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if updated.Labels["tier"] != "front" || updated.ResourceVersion == got.ResourceVersion {
		t.Fatalf("update did not take: labels %v rv %s", updated.Labels, updated.ResourceVersion)
	}
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Items) != 1 || list.ResourceVersion == "" {
		t.Fatalf("list = %d items, rv %q; want 1 item and a resourceVersion", len(list.Items), list.ResourceVersion)
	}
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := pods.Get(ctx, "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: err = %v, want NotFound", err)
	}
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("second delete: err = %v, want NotFound", err)
	}
}

func TestClusterScopedAndResourceGroup(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	className := uniqueName("typed-class")
	class := &resourcev1alpha2.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: className}, DriverName: "gpu.example.com"}
	if _, err := c.ResourceClasses().Create(ctx, class); err != nil {
		t.Fatalf("create class: %v", err)
	}
	ns := newNamespace(t, c)
	claim := &resourcev1alpha2.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim"},
		Spec:       resourcev1alpha2.ResourceClaimSpec{ResourceClassName: className},
	}
	if _, err := c.ResourceClaims(ns).Create(ctx, claim); err != nil {
		t.Fatalf("create claim: %v", err)
	}
	all, err := c.ResourceClaims("").List(ctx, metav1.ListOptions{FieldSelector: "spec.resourceClassName=" + className})
	if err != nil {
		t.Fatalf("list claims in all namespaces: %v", err)
	}
	if len(all.Items) != 1 || all.Items[0].Namespace != ns {
		t.Fatalf("claims of %s = %+v", className, all.Items)
	}
	if _, err := c.ResourceClaims("").Get(ctx, "claim"); err == nil {
		t.Fatal("get without a namespace succeeded")
	}
}

func TestUpdateStatusAndPatch(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	pods := c.Pods(ns)
	pod, err := pods.Create(ctx, makePod("s").obj())
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Labels = map[string]string{"ignored": "by-status-update"}
	out, err := pods.UpdateStatus(ctx, pod)
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if out.Status.Phase != corev1.PodRunning || out.Labels["ignored"] != "" {
		t.Fatalf("status update: phase %q labels %v; want Running and no label", out.Status.Phase, out.Labels)
	}
	out.Status.Phase = corev1.PodFailed
	out, err = pods.Update(ctx, out)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if out.Status.Phase != corev1.PodRunning {
		t.Fatalf("main update changed status to %q", out.Status.Phase)
	}
	out, err = pods.Patch(ctx, "s", types.MergePatchType, []byte(`{"metadata":{"labels":{"patched":"yes"}}}`))
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if out.Labels["patched"] != "yes" {
		t.Fatalf("labels after patch = %v", out.Labels)
	}
	out, err = pods.Patch(ctx, "s", types.MergePatchType, []byte(`{"status":{"message":"hello"}}`), "status")
	if err != nil {
		t.Fatalf("status patch: %v", err)
	}
	if out.Status.Message != "hello" {
		t.Fatalf("status message = %q", out.Status.Message)
	}
}

func TestUpdateConflict(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	pods := c.Pods(ns)
	first, err := pods.Create(ctx, makePod("x").obj())
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	stale := first.DeepCopy()
	first.Labels = map[string]string{"v": "1"}
	if _, err := pods.Update(ctx, first); err != nil {
		t.Fatalf("first update: %v", err)
	}
	stale.Labels = map[string]string{"v": "2"}
	if _, err := pods.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: err = %v, want Conflict", err)
	}
	rv := stale.ResourceVersion
	err = pods.Delete(ctx, "x", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	if !apierrors.IsConflict(err) {
		t.Fatalf("delete with stale precondition: err = %v, want Conflict", err)
	}
}

func TestWatch(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	pods := c.Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	p, err := pods.Create(ctx, makePod("w").obj())
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	p.Labels = map[string]string{"changed": "yes"}
	if _, err := pods.Update(ctx, p); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := pods.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before %s", want)
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if ev.Type != want || !isPod || pod.Name != "w" {
				t.Fatalf("event = %s %T, want %s of pod w", ev.Type, ev.Object, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s event", want)
		}
	}
}

func TestSelectors(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	pods := c.Pods(ns)
	for _, p := range []*corev1.Pod{
		makePod("a").label("app", "web").node("sel-node-1").obj(),
		makePod("b").label("app", "db").node("sel-node-2").obj(),
		makePod("c").label("app", "web").obj(),
	} {
		if _, err := pods.Create(ctx, p); err != nil {
			t.Fatalf("create %s: %v", p.Name, err)
		}
	}
	tests := map[string]struct {
		opts metav1.ListOptions
		want []string
	}{
		"label":           {metav1.ListOptions{LabelSelector: "app=web"}, []string{"a", "c"}},
		"field":           {metav1.ListOptions{FieldSelector: "spec.nodeName=sel-node-2"}, []string{"b"}},
		"unscheduled":     {metav1.ListOptions{FieldSelector: "spec.nodeName="}, []string{"c"}},
		"label and field": {metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "spec.nodeName!="}, []string{"a"}},
		"limit":           {metav1.ListOptions{Limit: 2}, []string{"a", "b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			list, err := pods.List(ctx, tc.opts)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			var got []string
			for _, p := range list.Items {
				got = append(got, p.Name)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("names = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("names = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
