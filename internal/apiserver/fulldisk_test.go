package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/internal/storage"
	"allot.dev/allot/internal/storage/storagetest"
)

// spaceServer is an API server of its own on an embedded etcd, as `allot
// up` runs it: the in-process client and the disk guard.
type spaceServer struct {
	t   *testing.T
	url string
	api *Server
}

func startSpaceServer(t *testing.T, cfg storage.EmbeddedConfig) *spaceServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg.Logger, cfg.UnsafeNoFsync = slog.New(slog.DiscardHandler), true
	e, err := storage.StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	c := e.InProcessClient()
	t.Cleanup(func() { c.Close() })
	srv := New(Config{Store: storage.New(c, storage.WithWriteGuard(e.CheckSpace)), Authenticator: testUsers, Logger: cfg.Logger})
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.EnsureNamespaces(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &spaceServer{t: t, url: hs.URL, api: srv}
}

func (s *spaceServer) do(method, path, body string) resp {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer admin")
	req.Header.Set("Content-Type", "application/json")
	if method == "PATCH" {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp{res.StatusCode, data}
}

// firstWatchEvent opens a watch of nodes from resourceVersion 0 and
// returns the type and name of its first event.
func (s *spaceServer) firstWatchEvent() string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/api/v1/nodes?watch=1&resourceVersion=0", nil)
	req.Header.Set("Authorization", "Bearer admin")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		s.t.Fatalf("watch: %d", res.StatusCode)
	}
	line, err := bufio.NewReader(res.Body).ReadBytes('\n')
	if err != nil {
		s.t.Fatal(err)
	}
	var ev struct {
		Type   string
		Object struct{ Metadata metav1.ObjectMeta }
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		s.t.Fatalf("decode %s: %v", line, err)
	}
	return ev.Type + " " + ev.Object.Metadata.Name
}

func nodeJSON(name string, fill int) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q,"annotations":{"fill":%q}}}`, name, strings.Repeat("x", fill))
}

// expectNoSpace checks a 507 answer whose Status names the condition.
func expectNoSpace(t *testing.T, r resp, condition string) {
	t.Helper()
	expect(t, r, http.StatusInsufficientStorage, "etcd cannot write: no space left on device", condition, "reads are still served")
	var st metav1.Status
	r.into(t, &st)
	if st.Reason != ReasonInsufficientStorage || st.Code != http.StatusInsufficientStorage {
		t.Fatalf("status %+v, want reason %s", st, ReasonInsufficientStorage)
	}
}

// expectReadsServed checks GET, LIST and WATCH of the node named kept,
// the first node by name.
func (s *spaceServer) expectReadsServed(kept string) {
	s.t.Helper()
	expect(s.t, s.do("GET", "/api/v1/nodes/"+kept, ""), 200, kept)
	expect(s.t, s.do("GET", "/api/v1/nodes", ""), 200, kept)
	if ev := s.firstWatchEvent(); ev != "ADDED "+kept {
		s.t.Fatalf("watch's first event %q, want ADDED %s", ev, kept)
	}
}

// TestFullDiskAnswers507 fills the tmpfs under the API server's etcd with
// another file: writes are answered 507 naming the condition, reads
// (GET, LIST, WATCH) served; once the file is gone writes work and the
// data is all there.
func TestFullDiskAnswers507(t *testing.T) {
	dir := storagetest.Tmpfs(t, 256)
	s := startSpaceServer(t, storage.EmbeddedConfig{DataDir: dir + "/etcd", DiskReserveBytes: 40 << 20})
	expect(t, s.do("POST", "/api/v1/nodes", nodeJSON("a-kept", 10)), 201)

	release := storagetest.FillDisk(t, dir, 20<<20)
	expectNoSpace(t, s.do("POST", "/api/v1/nodes", nodeJSON("refused", 10)), "below the 40.0 MiB allot keeps free")
	expectNoSpace(t, s.do("PATCH", "/api/v1/nodes/a-kept", `{"metadata":{"labels":{"a":"b"}}}`), "below the 40.0 MiB allot keeps free")
	s.expectReadsServed("a-kept")
	// `allot up` starting on the full disk: the namespaces it ensures
	// exist, nothing to write.
	if err := s.api.EnsureNamespaces(context.Background(), "default"); err != nil {
		t.Fatalf("ensure an existing namespace on a full disk: %v", err)
	}

	release()
	expect(t, s.do("POST", "/api/v1/nodes", nodeJSON("after", 10)), 201)
	expect(t, s.do("PATCH", "/api/v1/nodes/a-kept", `{"metadata":{"labels":{"a":"b"}}}`), 200, `"a":"b"`)
	expect(t, s.do("GET", "/api/v1/nodes/a-kept", ""), 200, `"fill":"xxxxxxxxxx"`)
	expect(t, s.do("GET", "/api/v1/nodes/refused", ""), 404)
}

// TestEtcdQuotaAnswers507 fills etcd to its backend quota through the
// API: writes are answered 507 naming etcd's NOSPACE condition, reads
// served, deletes work; after the deletes etcd recovers by itself (the
// member compacts, defragments and disarms its alarm) and nothing else
// is lost.
func TestEtcdQuotaAnswers507(t *testing.T) {
	s := startSpaceServer(t, storage.EmbeddedConfig{DataDir: t.TempDir(), QuotaBackendBytes: 8 << 20, SpaceCheckInterval: 50 * time.Millisecond})
	expect(t, s.do("POST", "/api/v1/nodes", nodeJSON("a-kept", 10)), 201)
	var filled []string
	for i := 0; ; i++ {
		if i == 500 {
			t.Fatal("500 nodes of 200 KiB did not reach an 8 MiB quota")
		}
		name := fmt.Sprintf("fill-%d", i)
		r := s.do("POST", "/api/v1/nodes", nodeJSON(name, 200<<10))
		// The write that crosses the quota is stored and still refused
		// (etcd's quota applier): delete it too.
		filled = append(filled, name)
		if r.code == 201 {
			continue
		}
		expectNoSpace(t, r, "database space exceeded")
		break
	}
	s.expectReadsServed("a-kept")
	for _, name := range filled {
		if r := s.do("DELETE", "/api/v1/nodes/"+name, ""); r.code != 200 && r.code != 404 {
			t.Fatalf("delete %s under the alarm: %s", name, r)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for r := s.do("POST", "/api/v1/nodes", nodeJSON("after", 10)); r.code != 201; r = s.do("POST", "/api/v1/nodes", nodeJSON("after", 10)) {
		if r.code != http.StatusInsufficientStorage || time.Now().After(deadline) {
			t.Fatalf("write after the deletes: %s", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	expect(t, s.do("GET", "/api/v1/nodes/a-kept", ""), 200, `"fill":"xxxxxxxxxx"`)
}
