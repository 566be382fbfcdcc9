package auth

import (
	"allot.dev/allot/internal/atomicfile"

	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const goodTokens = `# control plane
tok-admin,admin,admin

 tok-node , n1 , node
tok-drv,gpu.example.com,driver
tok-alice,Alice Smith,user
`

func writeTokens(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func bearer(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
	if token != "" {
		r.Header.Set("Authorization", token)
	}
	return r
}

func TestParseTokens(t *testing.T) {
	cases := map[string]struct {
		content string
		wantErr string
	}{
		"good file":            {content: goodTokens},
		"empty file":           {content: ""},
		"too few fields":       {content: "# x\ntok-secret,n1\n", wantErr: "line 2: want 3 fields"},
		"too many fields":      {content: "tok-secret,n1,node,extra\n", wantErr: "line 1: want 3 fields"},
		"unknown role":         {content: "tok-secret,n1,root\n", wantErr: `line 1: invalid identity: unknown role "root"`},
		"bad node name":        {content: "tok-secret,Node_1,node\n", wantErr: "line 1: invalid identity: node name"},
		"bad driver name":      {content: "tok-secret,-gpu,driver\n", wantErr: "line 1: invalid identity: driver name"},
		"empty name":           {content: "tok-secret,,user\n", wantErr: "line 1: invalid identity: empty name"},
		"empty token":          {content: ",alice,user\n", wantErr: "line 1: token is empty"},
		"token with space":     {content: "tok secret,alice,user\n", wantErr: "line 1: token is empty or has spaces"},
		"repeated token":       {content: "tok-secret,a,user\n\ntok-secret,b,user\n", wantErr: "line 3: token repeats line 1"},
		"control char in name": {content: "tok-secret,a\tb,user\n", wantErr: "line 1: invalid identity"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseTokens([]byte(tc.content))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parse: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "tok-secret") {
				t.Errorf("error %q leaks the token", err)
			}
		})
	}
}

func TestAuthenticateRequest(t *testing.T) {
	a, err := NewTokenAuthenticator(writeTokens(t, goodTokens), nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		header string
		want   User
		ok     bool
	}{
		"admin":                {header: "Bearer tok-admin", want: User{"admin", RoleAdmin}, ok: true},
		"node, spaces trimmed": {header: "Bearer tok-node", want: User{"n1", RoleNode}, ok: true},
		"driver":               {header: "Bearer tok-drv", want: User{"gpu.example.com", RoleDriver}, ok: true},
		"user with space":      {header: "Bearer tok-alice", want: User{"Alice Smith", RoleUser}, ok: true},
		"lowercase scheme":     {header: "bearer tok-admin", want: User{"admin", RoleAdmin}, ok: true},
		"no header":            {},
		"basic scheme":         {header: "Basic tok-admin"},
		"unknown token":        {header: "Bearer tok-nope"},
		"prefix of a token":    {header: "Bearer tok-adm"},
		"empty token":          {header: "Bearer "},
		"no scheme":            {header: "tok-admin"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u, ok := a.AuthenticateRequest(bearer(tc.header))
			if u != tc.want || ok != tc.ok {
				t.Errorf("AuthenticateRequest = %+v, %v; want %+v, %v", u, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestNewTokenAuthenticatorErrors(t *testing.T) {
	if _, err := NewTokenAuthenticator(filepath.Join(t.TempDir(), "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want ErrNotExist", err)
	}
	_, err := NewTokenAuthenticator(writeTokens(t, "a,b,c,d\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad file: err = %v, want line 1", err)
	}
}

// syncBuffer is a log sink safe for the reload goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestWarnsOnReadableFile(t *testing.T) {
	path := writeTokens(t, goodTokens)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	if _, err := NewTokenAuthenticator(path, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "readable by others") {
		t.Errorf("no warning in logs: %s", logs.String())
	}
}

func TestReloadKeepsTokensOfBrokenFile(t *testing.T) {
	path := writeTokens(t, goodTokens)
	var logs syncBuffer
	a, err := NewTokenAuthenticator(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("tok-new,bob,user\nbroken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.reload()
	if _, ok := a.AuthenticateRequest(bearer("Bearer tok-admin")); !ok {
		t.Errorf("old token rejected after broken reload")
	}
	if _, ok := a.AuthenticateRequest(bearer("Bearer tok-new")); ok {
		t.Errorf("token of broken file accepted")
	}
	if !strings.Contains(logs.String(), "line 2") {
		t.Errorf("reload error not logged with its line: %s", logs.String())
	}
	if err := os.WriteFile(path, []byte("tok-new,bob,user\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.reload()
	if _, ok := a.AuthenticateRequest(bearer("Bearer tok-admin")); ok {
		t.Errorf("removed token still accepted")
	}
	if u, ok := a.AuthenticateRequest(bearer("Bearer tok-new")); !ok || u.Name != "bob" {
		t.Errorf("new token: %+v, %v", u, ok)
	}
}

// eventually fails the test unless cond holds within a few seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunReloads(t *testing.T) {
	cases := map[string]func(a *TokenAuthenticator, ctx context.Context){
		"fsnotify": func(a *TokenAuthenticator, ctx context.Context) { a.Run(ctx) },
		"polling":  func(a *TokenAuthenticator, ctx context.Context) { a.poll(ctx) },
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeTokens(t, goodTokens)
			var logs syncBuffer
			a, err := NewTokenAuthenticator(path, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			a.pollInterval = 10 * time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); run(a, ctx) }()
			defer func() { cancel(); <-done }()

			tok, err := AppendToken(path, "n2", RoleNode)
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "appended token", func() bool {
				u, ok := a.AuthenticateRequest(bearer("Bearer " + tok))
				return ok && u == User{"n2", RoleNode}
			})
			// Size changes too, so polling sees it even on coarse mtimes.
			if err := atomicfile.WriteFile(path, []byte("garbage line\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			eventually(t, "reload error", func() bool { return strings.Contains(logs.String(), "keeping previous tokens") })
			if _, ok := a.AuthenticateRequest(bearer("Bearer " + tok)); !ok {
				t.Errorf("token lost after broken reload")
			}
		})
	}
}

var hexToken = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestAppendToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	tok1, err := AppendToken(path, "alice", RoleUser)
	if err != nil {
		t.Fatal(err)
	}
	tok2, err := AppendToken(path, "cards.dra.example.com", RoleDriver)
	if err != nil {
		t.Fatal(err)
	}
	if !hexToken.MatchString(tok1) || tok1 == tok2 {
		t.Errorf("tokens %q, %q: want distinct 64-digit hex", tok1, tok2)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode = %#o, want 0600", perm)
	}
	a, err := NewTokenAuthenticator(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := a.AuthenticateRequest(bearer("Bearer " + tok2)); !ok || u != (User{"cards.dra.example.com", RoleDriver}) {
		t.Errorf("driver token: %+v, %v", u, ok)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory has %d entries, want only the tokens file (temp files left?)", len(entries))
	}
}

func TestAppendTokenErrors(t *testing.T) {
	cases := map[string]struct {
		existing  string
		name      string
		role      Role
		wantErr   string
		wantErrIs error
	}{
		"unknown role":        {name: "x", role: "root", wantErrIs: ErrInvalidIdentity},
		"node name not DNS":   {name: "Node_1", role: RoleNode, wantErrIs: ErrInvalidIdentity},
		"driver name not DNS": {name: "gpu/x", role: RoleDriver, wantErrIs: ErrInvalidIdentity},
		"comma in user name":  {name: "a,b", role: RoleUser, wantErrIs: ErrInvalidIdentity},
		"node-driver no @":    {name: "gpu.example.com", role: RoleNodeDriver, wantErr: "not DRIVER@NODE", wantErrIs: ErrInvalidIdentity},
		"node-driver two @":   {name: "gpu.example.com@n1@n2", role: RoleNodeDriver, wantErr: `node "n1@n2"`, wantErrIs: ErrInvalidIdentity},
		"node-driver no node": {name: "gpu.example.com@", role: RoleNodeDriver, wantErrIs: ErrInvalidIdentity},
		"node-driver upper":   {name: "GPU.example.com@n1", role: RoleNodeDriver, wantErr: `driver "GPU.example.com"`, wantErrIs: ErrInvalidIdentity},
		"newline in name":     {name: "a\nb", role: RoleAdmin, wantErrIs: ErrInvalidIdentity},
		"broken file":         {existing: "x,y\n", name: "alice", role: RoleUser, wantErr: "line 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens.csv")
			if tc.existing != "" {
				if err := os.WriteFile(path, []byte(tc.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := AppendToken(path, tc.name, tc.role)
			if err == nil {
				t.Fatal("AppendToken succeeded")
			}
			if tc.wantErrIs != nil && !errors.Is(err, tc.wantErrIs) {
				t.Errorf("err = %v, want %v", err, tc.wantErrIs)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestAppendTokenNodeDriver(t *testing.T) {
	path := writeTokens(t, "tok-a,alice,user\n")
	tok, err := AppendToken(path, "gpu.example.com@node-1", RoleNodeDriver)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewTokenAuthenticator(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := a.AuthenticateRequest(bearer("Bearer " + tok))
	if !ok || u != (User{"gpu.example.com@node-1", RoleNodeDriver}) || u.Driver() != "gpu.example.com" || u.Node() != "node-1" {
		t.Errorf("AuthenticateRequest = %+v, %v", u, ok)
	}
}

func TestAppendTokenAddsMissingNewline(t *testing.T) {
	path := writeTokens(t, "tok-a,alice,user")
	tok, err := AppendToken(path, "bob", RoleUser)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewTokenAuthenticator(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range []string{"tok-a", tok} {
		if _, ok := a.AuthenticateRequest(bearer("Bearer " + tk)); !ok {
			t.Errorf("token %q rejected", tk)
		}
	}
}
