package client_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// clientAs connects to the test cluster as field manager name (the API
// server names a write's manager after the User-Agent's product).
func clientAs(t *testing.T, name string) *client.Client {
	t.Helper()
	cfg := newClient(t).RESTConfig()
	cfg.UserAgent = name + "/test"
	c, err := client.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	return c
}

func managers(p *corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, e := range p.ManagedFields {
		out[e.Manager] = true
	}
	return out
}

// TestInformerWithoutManagedFields: a factory made WithoutManagedFields
// caches objects without managedFields, whether they came by the list or
// by the watch, and with the rest of their metadata intact; an object from
// its cache sent back in an Update keeps the stored managedFields on the
// server, with the updater's entry added.
func TestInformerWithoutManagedFields(t *testing.T) {
	creator, updater := clientAs(t, "creator"), clientAs(t, "updater")
	ctx := testContext(t)
	ns := newNamespace(t, creator)
	if _, err := creator.Pods(ns).Create(ctx, makePod("listed").label("app", "web").obj()); err != nil {
		t.Fatalf("create: %v", err)
	}
	f := client.NewFactory(creator, 0, client.WithNamespace(ns), client.WithoutManagedFields())
	lister := f.Pods().Lister()
	runCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); f.Shutdown() }()
	f.Start(runCtx)
	if err := f.WaitForCacheSync(ctx); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if _, err := creator.Pods(ns).Create(ctx, makePod("watched").label("app", "web").obj()); err != nil {
		t.Fatalf("create: %v", err)
	}
	eventually(t, "pod watched in the cache", func() bool { _, err := lister.Get(ns, "watched"); return err == nil })
	for _, name := range []string{"listed", "watched"} {
		p, err := lister.Get(ns, name)
		if err != nil || p.ManagedFields != nil || p.Labels["app"] != "web" || p.UID == "" || len(p.Spec.Containers) != 1 {
			t.Fatalf("cached pod %s = %+v, %v; want no managedFields, the rest intact", name, p, err)
		}
		stored, err := creator.Pods(ns).Get(ctx, name)
		if err != nil || !managers(stored)["creator"] {
			t.Fatalf("stored pod %s has managers %v (%v); want creator's", name, managers(stored), err)
		}
	}

	cached, err := lister.Get(ns, "listed")
	if err != nil {
		t.Fatalf("lister get: %v", err)
	}
	p := cached.DeepCopy()
	p.Labels["v"] = "2"
	updated, err := updater.Pods(ns).Update(ctx, p)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if m := managers(updated); !m["creator"] || !m["updater"] || len(m) != 2 {
		t.Fatalf("managers after the update of a cached pod = %v; want creator and updater", m)
	}
	stored, err := creator.Pods(ns).Get(ctx, "listed")
	if m := managers(stored); err != nil || !m["creator"] || !m["updater"] {
		t.Fatalf("stored managers after the update = %v (%v); want creator and updater", m, err)
	}
	eventually(t, "the update in the cache", func() bool {
		p, err := lister.Get(ns, "listed")
		return err == nil && p.Labels["v"] == "2" && p.ManagedFields == nil
	})
}

// tap keeps the bodies of a client's list and watch responses.
type tap struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	seen []string // request queries
	body bytes.Buffer
}

func (tp *tap) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := tp.rt.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet {
		return res, err
	}
	tp.mu.Lock()
	tp.seen = append(tp.seen, r.URL.RawQuery)
	tp.mu.Unlock()
	res.Body = &tapBody{ReadCloser: res.Body, tp: tp}
	return res, nil
}

type tapBody struct {
	io.ReadCloser
	tp *tap
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.tp.mu.Lock()
	b.tp.body.Write(p[:n])
	b.tp.mu.Unlock()
	return n, err
}

// TestServerLeavesManagedFieldsOut: the lists and watches of a factory
// made WithoutManagedFields ask allot's API server to leave managedFields
// out, and what comes over the wire has none.
func TestServerLeavesManagedFieldsOut(t *testing.T) {
	creator := clientAs(t, "creator")
	ctx := testContext(t)
	ns := newNamespace(t, creator)
	if _, err := creator.Pods(ns).Create(ctx, makePod("listed").obj()); err != nil {
		t.Fatalf("create: %v", err)
	}
	tp := &tap{}
	cfg := newClient(t).RESTConfig()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { tp.rt = rt; return tp }
	watcher, err := client.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	f := client.NewFactory(watcher, 0, client.WithNamespace(ns), client.WithoutManagedFields())
	lister := f.Pods().Lister()
	runCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); f.Shutdown() }()
	f.Start(runCtx)
	if err := f.WaitForCacheSync(ctx); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if _, err := creator.Pods(ns).Create(ctx, makePod("watched").obj()); err != nil {
		t.Fatalf("create: %v", err)
	}
	eventually(t, "pod watched in the cache", func() bool { _, err := lister.Get(ns, "watched"); return err == nil })
	if l, err := watcher.Pods(ns).WithoutManagedFields().List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 2 {
		t.Fatalf("list: %v, %v", l, err)
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, q := range tp.seen {
		if !strings.Contains(q, "omitManagedFields=true") {
			t.Errorf("request %q does not ask to leave managedFields out", q)
		}
	}
	got := tp.body.String()
	if len(tp.seen) < 2 || !strings.Contains(got, `"kind":"PodList"`) || !strings.Contains(got, `"name":"listed"`) || !strings.Contains(got, `"name":"watched"`) {
		t.Fatalf("tapped %d requests, bodies %s", len(tp.seen), got)
	}
	if strings.Contains(got, "managedFields") {
		t.Errorf("managedFields came over the wire: %s", got)
	}
}
