package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/storage"
)

// One etcd and one API server serve the package's tests; each test works
// in namespaces and names of its own.
var (
	testStore *storage.Store
	testSrv   *httptest.Server
	testAPI   *Server
)

// fakeAuthn maps tokens to users; the real token file is tested in auth.
type fakeAuthn map[string]auth.User

func (f fakeAuthn) AuthenticateRequest(r *http.Request) (auth.User, bool) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	u, ok := f[tok]
	return u, ok
}

var testUsers = fakeAuthn{
	"admin":     {Name: "admin", Role: auth.RoleAdmin},
	"user":      {Name: "alice", Role: auth.RoleUser},
	"node1":     {Name: "n1", Role: auth.RoleNode},
	"marknode":  {Name: "marks-node", Role: auth.RoleNode},
	"sched":     {Name: "scheduler", Role: auth.RoleScheduler},
	"driver":    {Name: "gpu.example.com", Role: auth.RoleDriver},
	"nicdriver": {Name: "nic.example.com", Role: auth.RoleDriver},
	"ndriver":   {Name: "gpu.example.com@n1", Role: auth.RoleNodeDriver},
	// applydriver has a driver and node no other test publishes.
	"applydriver": {Name: "apply.example.com@apply-n9", Role: auth.RoleNodeDriver},
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "apiserver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.DiscardHandler)
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{DataDir: dir, Logger: quiet, UnsafeNoFsync: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start etcd:", err)
		return 1
	}
	defer e.Close()
	c, err := storage.NewClient(ctx, e.Endpoints(), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect etcd:", err)
		return 1
	}
	defer c.Close()
	testStore = storage.New(c)
	testAPI = New(Config{Store: testStore, Authenticator: testUsers, Logger: quiet})
	if err := testAPI.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start server:", err)
		return 1
	}
	if err := testAPI.EnsureNamespaces(ctx, "default"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testSrv = httptest.NewServer(testAPI.Handler())
	defer testSrv.Close()
	return m.Run()
}

// resp is an HTTP answer.
type resp struct {
	code int
	body []byte
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.code, r.body) }

// into decodes the body.
func (r resp) into(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// call sends a request as the user with the token.
func call(t *testing.T, token, method, path string, body any, header ...string) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, testSrv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{res.StatusCode, data}
}

func admin(t *testing.T, method, path string, body any, header ...string) resp {
	t.Helper()
	return call(t, "admin", method, path, body, header...)
}

// expect fails unless the answer has the code and, if given, contains all
// the substrings.
func expect(t *testing.T, r resp, code int, contains ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("got %s, want code %d", r, code)
	}
	for _, c := range contains {
		if !strings.Contains(string(r.body), c) {
			t.Fatalf("answer %s does not contain %q", r.body, c)
		}
	}
}

var nsSeq atomic.Int64

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%d", time.Now().UnixNano()%100000, nsSeq.Add(1))
	expect(t, admin(t, "POST", "/api/v1/namespaces", fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, name)), 201)
	return name
}
