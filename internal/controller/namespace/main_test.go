package namespace

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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/controller/controllerutil/testcluster"
)

// allotBin is the allot binary built once for the package's tests.
var allotBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "allot-namespace-test-")
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

type env struct {
	t   *testing.T
	ctx context.Context
	dyn dynamic.Interface
}

// startServer starts an API server; startController runs the controller.
func startServer(t *testing.T) (*env, *rest.Config) {
	t.Helper()
	cfg := testcluster.Start(t, allotBin)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &env{t: t, ctx: ctx, dyn: dyn}, cfg
}

func (e *env) startController(cfg *rest.Config) {
	e.t.Helper()
	c, err := New(cfg, Options{
		ResyncInterval: time.Second, // client-go's minimum
		MinRetryDelay:  50 * time.Millisecond,
		MaxRetryDelay:  500 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
}

// testWriter sends the controller's log to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

var (
	podGVR   = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	claimGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1alpha2", Resource: "resourceclaims"}
	crdGVR   = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgets  = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

func u(obj map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: obj} }

func namespaceObj(name string) *unstructured.Unstructured {
	return u(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}})
}

// podObj is a pod; a node name binds it, so its deletion waits for the
// node agent (here: the test) to delete it again with a zero grace period.
func podObj(name, node string) *unstructured.Unstructured {
	spec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}
	if node != "" {
		spec["nodeName"] = node
	}
	return u(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name}, "spec": spec})
}

func claimObj(name string) *unstructured.Unstructured {
	return u(map[string]any{
		"apiVersion": "resource.k8s.io/v1alpha2", "kind": "ResourceClaim", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"resourceClassName": "gpu"},
	})
}

func widgetObj(name string) *unstructured.Unstructured {
	return u(map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": name}})
}

func widgetCRD() *unstructured.Unstructured {
	return u(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	})
}

func (e *env) client(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return e.dyn.Resource(gvr)
	}
	return e.dyn.Resource(gvr).Namespace(ns)
}

func (e *env) create(gvr schema.GroupVersionResource, ns string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	e.t.Helper()
	out, err := e.client(gvr, ns).Create(e.ctx, obj, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create %s %s: %v", gvr.Resource, obj.GetName(), err)
	}
	return out
}

// get reads an object; nil when it does not exist.
func (e *env) get(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	e.t.Helper()
	out, err := e.client(gvr, ns).Get(e.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("get %s %s: %v", gvr.Resource, name, err)
	}
	return out
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
