package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
)

type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// startWatch opens a watch and returns its events.
func startWatch(t *testing.T, path string) <-chan watchEvent {
	t.Helper()
	return startWatchOn(t, testSrv.URL, path)
}

func startWatchOn(t *testing.T, base, path string) <-chan watchEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer admin")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan watchEvent, 100)
	go func() {
		defer res.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev watchEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				out <- ev
			}
		}
	}()
	return out
}

func nextEvent(t *testing.T, ch <-chan watchEvent) watchEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch ended")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}
	return watchEvent{}
}

func TestWatchFromResourceVersion(t *testing.T) {
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"
	var first corev1.Pod
	admin(t, "POST", base, makePod("w1").obj()).into(t, &first)
	expect(t, admin(t, "POST", base, makePod("w2").obj()), 201)

	// From the first pod's version: the second pod's creation is replayed.
	ch := startWatch(t, base+"?watch=true&resourceVersion="+first.ResourceVersion)
	if ev := nextEvent(t, ch); ev.Type != "ADDED" || !contains(ev.Object, `"name":"w2"`) {
		t.Fatalf("first event %s %s", ev.Type, ev.Object)
	}
	expect(t, admin(t, "DELETE", base+"/w1", nil), 200)
	if ev := nextEvent(t, ch); ev.Type != "DELETED" || !contains(ev.Object, `"name":"w1"`) {
		t.Fatalf("second event %s %s", ev.Type, ev.Object)
	}

	// Without a version: the current state as ADDED events, then changes;
	// label selectors filter.
	ch2 := startWatch(t, base+"?watch=true&labelSelector=team%3Dred")
	expect(t, admin(t, "POST", base, makePod("w3").label("team", "blue").obj()), 201)
	expect(t, admin(t, "POST", base, makePod("w4").label("team", "red").obj()), 201)
	if ev := nextEvent(t, ch2); !contains(ev.Object, `"name":"w4"`) {
		t.Fatalf("selector let through %s", ev.Object)
	}
}

func TestWatchTooOldVersionIsGone(t *testing.T) {
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"
	var p corev1.Pod
	admin(t, "POST", base, makePod("old").obj()).into(t, &p)
	for i := 0; i < 3; i++ {
		expect(t, admin(t, "POST", base, makePod("x"+string(rune('a'+i))).obj()), 201)
	}
	rev, err := testStore.CurrentRevision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := testStore.Compact(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	// A list at a compacted version through etcd answers 410 Gone.
	expect(t, admin(t, "GET", base+"?limit=1&resourceVersion="+p.ResourceVersion, nil), 410, "Expired")
	// The watch cache still holds these events and serves them from memory;
	// a version older than its window is read from etcd's history, which
	// is compacted here: Gone. A server with a tiny window shows it.
	small := New(Config{Store: testStore, Authenticator: testUsers, Logger: testAPI.log, WatchCacheEvents: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := small.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(small.Handler())
	defer srv.Close()
	for i := 0; i < 4; i++ {
		expect(t, admin(t, "POST", base, makePod("y"+string(rune('a'+i))).obj()), 201)
	}
	ch := startWatchOn(t, srv.URL, base+"?watch=true&resourceVersion="+p.ResourceVersion)
	ev := nextEvent(t, ch)
	if ev.Type != "ERROR" || !contains(ev.Object, `"code":410`) {
		t.Fatalf("got %s %s, want ERROR 410", ev.Type, ev.Object)
	}
}

func contains(b []byte, s string) bool {
	return len(b) > 0 && json.Valid(b) && stringContains(string(b), s)
}

func stringContains(a, b string) bool {
	return len(b) == 0 || (len(a) >= len(b) && indexOf(a, b) >= 0)
}

func indexOf(a, b string) int {
	for i := 0; i+len(b) <= len(a); i++ {
		if a[i:i+len(b)] == b {
			return i
		}
	}
	return -1
}
