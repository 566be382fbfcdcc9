package logs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"allot.dev/allot/internal/node/podfiles"
	"allot.dev/allot/internal/node/pods"
)

func TestTailOffset(t *testing.T) {
	tests := map[string]struct {
		content string
		n       int64
		want    string
	}{
		"last two":          {"a\nb\nc\n", 2, "b\nc\n"},
		"more than exist":   {"a\nb\n", 5, "a\nb\n"},
		"no final newline":  {"a\nb\nc", 1, "c"},
		"zero":              {"a\nb\n", 0, ""},
		"empty file":        {"", 3, ""},
		"long lines":        {strings.Repeat("x", tailChunk+10) + "\n" + strings.Repeat("y", tailChunk) + "\n", 1, strings.Repeat("y", tailChunk) + "\n"},
		"blank lines count": {"a\n\n\n", 2, "\n\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := writeTemp(t, tc.content)
			off, err := tailOffset(f, int64(len(tc.content)), tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.content[off:]; got != tc.want {
				t.Fatalf("tail = %q, want %q", got, tc.want)
			}
		})
	}
}

func writeTemp(t *testing.T, content string) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fakePods is a Lookup whose one pod the test changes.
type fakePods struct {
	mu   sync.Mutex
	snap *pods.Snapshot
}

func (f *fakePods) lookup(ns, name string) (*pods.Snapshot, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.snap == nil || f.snap.Key.Namespace != ns || f.snap.Key.Name != name {
		return nil, false
	}
	return f.snap, true
}

func (f *fakePods) set(attempt int, running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap = &pods.Snapshot{Key: podfiles.PodKey{Namespace: "ns", Name: "p", UID: "u1"},
		Containers: map[string]pods.ContainerSnapshot{"c": {Attempt: attempt, Running: running}}}
}

func newTestServer(t *testing.T, anonymous bool) (*httptest.Server, *fakePods, string) {
	t.Helper()
	root := t.TempDir()
	fp := &fakePods{}
	fp.set(1, false)
	key := fp.snap.Key
	for attempt, content := range []string{"old 1\nold 2\n", "one\ntwo\nthree\n"} {
		p := podfiles.LogPath(root, key, "c", attempt)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(NewHandler(Options{RootDir: root, Lookup: fp.lookup, Tokens: []string{"secret"},
		AllowAnonymous: anonymous, FollowPoll: 10 * time.Millisecond}))
	t.Cleanup(srv.Close)
	return srv, fp, root
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	code, body, err := fetch(url, token)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

func fetch(url, token string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func TestServeLogs(t *testing.T) {
	srv, _, _ := newTestServer(t, false)
	base := srv.URL + "/containerLogs/ns/p/c"
	tests := map[string]struct {
		url, token string
		code       int
		body       string
	}{
		"whole log":        {base, "secret", 200, "one\ntwo\nthree\n"},
		"tail":             {base + "?tailLines=2", "secret", 200, "two\nthree\n"},
		"limit":            {base + "?limitBytes=5", "secret", 200, "one\nt"},
		"previous":         {base + "?previous=true", "secret", 200, "old 1\nold 2\n"},
		"ignored params":   {base + "?timestamps=true&sinceSeconds=10", "secret", 200, "one\ntwo\nthree\n"},
		"no token":         {base, "", 401, "Unauthorized\n"},
		"wrong token":      {base, "secrets", 401, "Unauthorized\n"},
		"unknown pod":      {srv.URL + "/containerLogs/ns/q/c", "secret", 404, ""},
		"unknown ctr":      {srv.URL + "/containerLogs/ns/p/d", "secret", 404, ""},
		"bad tail":         {base + "?tailLines=-1", "secret", 400, ""},
		"health, no token": {srv.URL + "/healthz", "", 200, "ok"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, body := get(t, tc.url, tc.token)
			if code != tc.code || (tc.body != "" && body != tc.body) {
				t.Fatalf("GET = %d %q, want %d %q", code, body, tc.code, tc.body)
			}
		})
	}
}

func TestAnonymousAllowed(t *testing.T) {
	srv, _, _ := newTestServer(t, true)
	if code, _ := get(t, srv.URL+"/containerLogs/ns/p/c", ""); code != 200 {
		t.Fatalf("anonymous GET = %d", code)
	}
}

func TestFollowEndsWhenContainerStops(t *testing.T) {
	srv, fp, root := newTestServer(t, false)
	fp.set(1, true)
	path := podfiles.LogPath(root, fp.snap.Key, "c", 1)
	type result struct {
		code int
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, body, err := fetch(srv.URL+"/containerLogs/ns/p/c?follow=true", "secret")
		done <- result{code, body, err}
	}()
	time.Sleep(50 * time.Millisecond)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("four\n")
	f.Close()
	select {
	case r := <-done:
		t.Fatalf("follow ended while the container runs: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	fp.set(1, false)
	select {
	case r := <-done:
		if r.err != nil || r.code != 200 || r.body != "one\ntwo\nthree\nfour\n" {
			t.Fatalf("follow = %d %q", r.code, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the container stopped")
	}
}
