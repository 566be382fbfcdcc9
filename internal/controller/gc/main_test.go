package gc

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"allot.dev/allot/internal/controller/controllerutil/testcluster"
)

// allotBin is the allot binary built once for the package's tests.
var allotBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "allot-gc-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	allotBin, err = testcluster.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pollTimeout is generous: the tests assert outcomes, never timing.
const pollTimeout = 30 * time.Second

// env is one test's cluster with a running collector.
type env struct {
	t   *testing.T
	ctx context.Context
	dyn dynamic.Interface
	ns  string
}

// startCollector starts a server and a collector with sub-second intervals.
func startCollector(t *testing.T) *env {
	t.Helper()
	cfg := testcluster.Start(t, allotBin)
	c, err := New(cfg, Options{
		ResyncInterval:      time.Second, // client-go's minimum
		RediscoveryInterval: 500 * time.Millisecond,
		Logger:              slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	return &env{t: t, ctx: ctx, dyn: dyn, ns: "default"}
}

// testWriter sends the collector's log to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

var (
	podGVR   = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	claimGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1alpha2", Resource: "resourceclaims"}
	classGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1alpha2", Resource: "resourceclasses"}
)

// object builds an unstructured fixture.
type object struct {
	gvr schema.GroupVersionResource
	u   *unstructured.Unstructured
}

func pod(name string) *object {
	return &object{gvr: podGVR, u: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}},
	}}}
}

func claim(name string) *object {
	return &object{gvr: claimGVR, u: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClaim", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"resourceClassName": "gpu"},
	}}}
}

func class(name string) *object {
	return &object{gvr: classGVR, u: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClass", "metadata": map[string]any{"name": name},
		"driverName": "gpu.example.com",
	}}}
}

// ownedBy adds an owner reference to a created object.
func (o *object) ownedBy(owner *unstructured.Unstructured) *object {
	return o.ownedByUID(owner, owner.GetUID())
}

// ownedByUID adds an owner reference with the owner's name and the given uid.
func (o *object) ownedByUID(owner *unstructured.Unstructured, uid types.UID) *object {
	o.u.SetOwnerReferences(append(o.u.GetOwnerReferences(), metav1.OwnerReference{
		APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: uid,
	}))
	return o
}

// blocking sets blockOwnerDeletion on every owner reference.
func (o *object) blocking() *object {
	refs := o.u.GetOwnerReferences()
	yes := true
	for i := range refs {
		refs[i].BlockOwnerDeletion = &yes
	}
	o.u.SetOwnerReferences(refs)
	return o
}

func (o *object) finalizers(f ...string) *object { o.u.SetFinalizers(f); return o }

func (e *env) client(gvr schema.GroupVersionResource, namespaced bool) dynamic.ResourceInterface {
	if namespaced {
		return e.dyn.Resource(gvr).Namespace(e.ns)
	}
	return e.dyn.Resource(gvr)
}

func namespaced(gvr schema.GroupVersionResource) bool { return gvr != classGVR && gvr != crdGVR }

// create stores the fixture and returns the stored object.
func (e *env) create(o *object) *unstructured.Unstructured {
	e.t.Helper()
	out, err := e.client(o.gvr, namespaced(o.gvr)).Create(e.ctx, o.u, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create %s %s: %v", o.gvr.Resource, o.u.GetName(), err)
	}
	return out
}

// get reads an object; nil when it does not exist.
func (e *env) get(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	e.t.Helper()
	out, err := e.client(gvr, namespaced(gvr)).Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("get %s %s: %v", gvr.Resource, name, err)
	}
	return out
}

func (e *env) delete(gvr schema.GroupVersionResource, name string, policy metav1.DeletionPropagation) {
	e.t.Helper()
	opts := metav1.DeleteOptions{}
	if policy != "" {
		opts.PropagationPolicy = &policy
	}
	if err := e.client(gvr, namespaced(gvr)).Delete(e.ctx, name, opts); err != nil {
		e.t.Fatalf("delete %s %s: %v", gvr.Resource, name, err)
	}
}

// eventually polls cond until it holds, failing the test after pollTimeout.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) eventuallyGone(gvr schema.GroupVersionResource, name string) {
	e.t.Helper()
	e.eventually(gvr.Resource+" "+name+" is gone", func() bool { return e.get(gvr, name) == nil })
}
