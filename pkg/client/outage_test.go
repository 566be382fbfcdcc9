package client_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogWriteOutages: a client whose writes are answered 507 (the API
// server's storage is full) logs it once however often it retries, keeps
// the answer's message for the caller, and logs once when writes work
// again. The API server is faked: it is the far side of a process
// boundary, and only its answers matter here.
func TestLogWriteOutages(t *testing.T) {
	const msg = "etcd cannot write: no space left on device (database space exceeded); reads are still served"
	var full atomic.Bool
	full.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost && full.Load() {
			w.WriteHeader(http.StatusInsufficientStorage)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"` + msg + `","reason":"InsufficientStorage","code":507}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`))
	}))
	defer srv.Close()
	var logs syncBuffer
	rc := &rest.Config{Host: srv.URL}
	client.LogWriteOutages(rc, slog.New(slog.NewTextHandler(&logs, nil)))
	c, err := client.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for range 5 {
		_, err := c.Nodes().Create(context.Background(), node)
		if apierrors.ReasonForError(err) != "InsufficientStorage" || !strings.Contains(err.Error(), msg) {
			t.Fatalf("create on a full store: %v", err)
		}
	}
	full.Store(false)
	for range 3 {
		if _, err := c.Nodes().Create(context.Background(), node); err != nil {
			t.Fatal(err)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "the API server refuses writes"); n != 1 || !strings.Contains(out, "database space exceeded") {
		t.Errorf("refusal logged %d times, want once with the reason:\n%s", n, out)
	}
	if n := strings.Count(out, "the API server takes writes again"); n != 1 {
		t.Errorf("recovery logged %d times, want once:\n%s", n, out)
	}
}
