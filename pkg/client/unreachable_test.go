package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// outageProxy forwards TCP connections to the test cluster's API server.
// While down, it accepts each connection and closes it at once, as a
// host whose API server is restarting does (the client sees EOF), and
// counts those attempts.
type outageProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	tried  int
}

func startOutageProxy(t *testing.T, target string) *outageProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &outageProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.setDown(true) })
	go p.serve()
	return p
}

func (p *outageProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.tried++
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *outageProxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[s] = struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	_, _ = io.Copy(c, s)
	c.Close()
}

// setDown starts (true) or ends an outage; starting one cuts every open
// connection.
func (p *outageProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down, p.tried = down, 0
	if down {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

func (p *outageProxy) attempts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tried
}

// TestInformerResumesAfterOutage checks that an informer's lister-watcher
// rides out an API server outage itself instead of leaving it to the
// reflector's back-off. client-go's reflector backs off exponentially on a
// failed list or watch (0.8 s doubling to 30 s, with jitter to 60 s, reset
// only every two minutes) and sleeps that long even when the server is
// back. The reflector here is given a back-off of one hour, standing for
// one that has grown past any outage: if it ever backs off, it neither
// tries again during the outage nor sees the pod created after it, and
// the waits below fail at their deadlines (30 s each, far above the
// second it takes when nothing backs off). This is a check of the
// mechanism, not of speed.
func TestInformerResumesAfterOutage(t *testing.T) {
	c := newClient(t)
	ns := newNamespace(t, c)
	rc, err := client.LoadRESTConfig(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rc.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := startOutageProxy(t, u.Host)
	rc.Host = "https://" + p.ln.Addr().String()
	pc, err := client.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	r := cache.NewReflectorWithOptions(pc.Pods(ns).ListWatch(), &corev1.Pod{}, store, cache.ReflectorOptions{
		Name:    "outage",
		Backoff: &wait.Backoff{Duration: time.Hour, Cap: time.Hour, Steps: 1},
	})
	done := make(chan struct{})
	go func() { defer close(done); r.RunWithContext(ctx) }()
	defer func() { cancel(); <-done }()

	inStore := func(name string) func() bool {
		return func() bool { _, ok, _ := store.GetByKey(ns + "/" + name); return ok }
	}
	// The first pod is created after the first list, so that it arrives
	// by the watch, which so has seen an event and is re-opened at once
	// when it breaks (a watch that ends in under a second without events
	// goes through the back-off).
	waitFor(t, "the first list", func() bool { return r.LastSyncResourceVersion() != "" })
	if _, err := c.Pods(ns).Create(testContext(t), makePod("before").obj()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod created before the outage in the informer's store", inStore("before"))

	p.setDown(true)
	waitFor(t, "three watch attempts during the outage", func() bool { return p.attempts() >= 3 })
	p.setDown(false)

	if _, err := c.Pods(ns).Create(testContext(t), makePod("after").obj()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod created after the outage in the informer's store", inStore("after"))
}

// waitFor polls cond until it holds or 30 seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestUnreachable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&url.Error{Op: "Get", URL: "https://x", Err: io.EOF}, true},
		{&url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, true},
		{fmt.Errorf("list: %w", syscall.ECONNRESET), true},
		{apierrors.NewServiceUnavailable("storage not ready"), true},
		{apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a"), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
		{apierrors.NewInternalError(errors.New("boom")), false},
		{context.Canceled, false},
	} {
		if got := client.Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
