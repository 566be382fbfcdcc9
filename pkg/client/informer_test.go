package client_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// podEvents records what an informer's handler saw, by pod name.
type podEvents struct {
	mu      sync.Mutex
	added   map[string]int
	updated map[string][]string // label "v" of each new object
	deleted map[string]int
}

func newPodEvents() *podEvents {
	return &podEvents{added: map[string]int{}, updated: map[string][]string{}, deleted: map[string]int{}}
}

func (e *podEvents) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { e.mu.Lock(); e.added[obj.(*corev1.Pod).Name]++; e.mu.Unlock() },
		UpdateFunc: func(_, obj any) {
			p := obj.(*corev1.Pod)
			e.mu.Lock()
			e.updated[p.Name] = append(e.updated[p.Name], p.Labels["v"])
			e.mu.Unlock()
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			e.mu.Lock()
			e.deleted[obj.(*corev1.Pod).Name]++
			e.mu.Unlock()
		},
	}
}

func (e *podEvents) check(f func(*podEvents) bool) func() bool {
	return func() bool { e.mu.Lock(); defer e.mu.Unlock(); return f(e) }
}

func TestFactoryInformerSyncAndUpdates(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	pods := c.Pods(ns)
	if _, err := pods.Create(ctx, makePod("before").label("app", "web").obj()); err != nil {
		t.Fatalf("create: %v", err)
	}
	f := client.NewFactory(c, 0, client.WithNamespace(ns))
	inf := f.Pods()
	if f.Pods().SharedIndexInformer != inf.SharedIndexInformer {
		t.Fatal("factory returned two informers for pods")
	}
	seen := newPodEvents()
	if _, err := inf.AddEventHandler(seen.handler()); err != nil {
		t.Fatalf("add handler: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); f.Shutdown() }()
	f.Start(runCtx)
	if err := f.WaitForCacheSync(ctx); err != nil {
		t.Fatalf("sync: %v", err)
	}
	lister := inf.Lister()
	if p, err := lister.Get(ns, "before"); err != nil || p.Labels["app"] != "web" {
		t.Fatalf("lister get = %v, %v", p, err)
	}
	if _, err := lister.Get(ns, "missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("lister get missing: err = %v, want NotFound", err)
	}

	p, err := pods.Create(ctx, makePod("after").obj())
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	p.Labels = map[string]string{"v": "2", "app": "web"}
	if _, err := pods.Update(ctx, p); err != nil {
		t.Fatalf("update: %v", err)
	}
	eventually(t, "update event of pod after", seen.check(func(e *podEvents) bool {
		u := e.updated["after"]
		return e.added["before"] == 1 && e.added["after"] == 1 && len(u) == 1 && u[0] == "2"
	}))
	web, err := lister.List(labels.SelectorFromSet(labels.Set{"app": "web"}))
	if err != nil || len(web) != 2 {
		t.Fatalf("lister list app=web = %d pods, %v; want 2", len(web), err)
	}
	if inNS, err := lister.ListNamespace(ns, nil); err != nil || len(inNS) != 2 {
		t.Fatalf("lister list namespace = %d pods, %v; want 2", len(inNS), err)
	}
	if err := pods.Delete(ctx, "after", deleteNow()); err != nil {
		t.Fatalf("delete: %v", err)
	}
	eventually(t, "delete event", seen.check(func(e *podEvents) bool { return e.deleted["after"] == 1 }))
}

func TestInformerFieldSelector(t *testing.T) {
	c, ctx := newClient(t), testContext(t)
	ns := newNamespace(t, c)
	pods := c.Pods(ns)
	node := uniqueName("fs-node")
	inf := client.NewInformer(c.Pods(""), 0, nil, client.WithFieldSelector("spec.nodeName="+node))
	seen := newPodEvents()
	if _, err := inf.AddEventHandler(seen.handler()); err != nil {
		t.Fatalf("add handler: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go inf.RunWithContext(runCtx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	for _, p := range []*corev1.Pod{makePod("mine").node(node).obj(), makePod("other").node("fs-other").obj()} {
		if _, err := pods.Create(ctx, p); err != nil {
			t.Fatalf("create %s: %v", p.Name, err)
		}
	}
	eventually(t, "pod on "+node, seen.check(func(e *podEvents) bool { return e.added["mine"] == 1 }))
	lister := client.NewLister[*corev1.Pod](inf.GetIndexer(), corev1.Resource("pods"))
	all, err := lister.List(nil)
	if err != nil || len(all) != 1 || all[0].Name != "mine" {
		t.Fatalf("cached pods = %v, %v; want only mine", all, err)
	}
}

// An update to an object with another UID reaches the handler as the old
// object's deletion (a tombstone) and the new one's addition; other
// updates pass unchanged.
func TestSplitReplacements(t *testing.T) {
	var got []string
	h := client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { got = append(got, "add "+string(obj.(*corev1.Pod).UID)) },
		UpdateFunc: func(o, n any) {
			got = append(got, "update "+string(o.(*corev1.Pod).UID)+"->"+string(n.(*corev1.Pod).UID))
		},
		DeleteFunc: func(obj any) {
			tomb, ok := obj.(cache.DeletedFinalStateUnknown)
			if !ok || tomb.Key != "ns/p" {
				t.Fatalf("delete of a replaced object without its tombstone: %#v", obj)
			}
			got = append(got, "delete "+string(tomb.Obj.(*corev1.Pod).UID))
		},
	})
	pod := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID(uid)}}
	}
	h.OnUpdate(pod("a"), pod("a"))
	h.OnUpdate(pod("a"), pod("b"))
	want := []string{"update a->a", "delete a", "add b"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	// Handlers without a delete or an update still get the rest.
	got = nil
	client.SplitReplacements(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { got = append(got, "add") }}).OnUpdate(pod("a"), pod("b"))
	if !slices.Equal(got, []string{"add"}) {
		t.Fatalf("events %q, want the add only", got)
	}
}
