package client

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// fakeAPIServer answers every request with 200 and the body it got, or
// with 503 while unavailable; it counts requests. It stands for an API
// server on the far side of the connection.
type fakeAPIServer struct {
	*httptest.Server
	hits        atomic.Int32
	unavailable atomic.Bool
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	f := &fakeAPIServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		if f.unavailable.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(append([]byte(r.Method+" "), body...))
	}))
	t.Cleanup(f.Close)
	return f
}

// deadURL is a URL nothing listens on.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestWithFailover(t *testing.T) {
	a, b := newFakeAPIServer(t), newFakeAPIServer(t)
	dead := deadURL(t)
	rc := &rest.Config{}
	if err := WithFailover(rc, []string{dead, a.URL, b.URL}, nil); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, body string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), method, rc.Host+"/api/v1/pods", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", method, resp.StatusCode, out)
		}
		return string(out)
	}
	// The first server is down: a POST's body reaches the second intact,
	// and later requests go there directly.
	if got := do("POST", `{"kind":"Pod"}`); got != `POST {"kind":"Pod"}` {
		t.Fatalf("POST answered %q", got)
	}
	do("GET", "")
	if a.hits.Load() != 2 || b.hits.Load() != 0 {
		t.Fatalf("hits a=%d b=%d, want 2 and 0", a.hits.Load(), b.hits.Load())
	}
	// 503 (not ready): the next server serves, and stays in use.
	a.unavailable.Store(true)
	do("PUT", "x")
	do("GET", "")
	if a.hits.Load() != 3 || b.hits.Load() != 2 {
		t.Fatalf("hits a=%d b=%d, want 3 and 2", a.hits.Load(), b.hits.Load())
	}
	// All unavailable: the last server's 503 is the answer.
	b.unavailable.Store(true)
	req, _ := http.NewRequest("GET", rc.Host+"/api", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("all servers unavailable: %d, want 503", resp.StatusCode)
	}
	// None reachable: the first connection error.
	a.Close()
	b.Close()
	req, _ = http.NewRequest("GET", rc.Host+"/api", nil)
	if _, err := hc.Do(req); err == nil || !Unreachable(err) {
		t.Fatalf("no server reachable: err %v, want an unreachable error", err)
	}
}

func TestWithFailoverRefusesBadURLs(t *testing.T) {
	for _, s := range []string{"10.0.0.1:6443", "ftp://x", "https://", "https://h:6443/prefix"} {
		err := WithFailover(&rest.Config{}, []string{"https://ok:6443", s}, nil)
		if err == nil || !strings.Contains(err.Error(), "API server 1") {
			t.Errorf("%q: err %v, want one naming API server 1", s, err)
		}
	}
}
