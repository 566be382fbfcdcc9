package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/internal/dashboard"
)

func TestUpPrintsLoginURL(t *testing.T) {
	if want := dashboard.LoginURL(up.URL, up.AdminToken); up.Dashboard != want {
		t.Fatalf("allot up printed dashboard %q, want %q", up.Dashboard, want)
	}
	u, err := url.Parse(up.Dashboard)
	if err != nil {
		t.Fatal(err)
	}
	if u.Path != dashboard.Path || u.RawQuery != "" {
		t.Errorf("dashboard URL %q: want path %s and no query (the token must not reach the server)", up.Dashboard, dashboard.Path)
	}
	if u.Fragment != "token="+up.AdminToken {
		t.Errorf("dashboard URL fragment %q, want the admin token", u.Fragment)
	}
}

func TestLoginURLEscapesToken(t *testing.T) {
	got := dashboard.LoginURL("https://h:1/", "a&b=c d")
	if want := "https://h:1/dashboard/#token=a%26b%3Dc+d"; got != want {
		t.Errorf("LoginURL = %q, want %q", got, want)
	}
}

// The page and its assets are served without a token (they hold no data),
// with a strict content security policy, and reference nothing outside
// the binary.
func TestPageIsPublicAndSelfContained(t *testing.T) {
	resp, body := get(t, dashboard.Path, "")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %s %s", dashboard.Path, resp.Status, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q does not confine scripts and connections to the origin", csp)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(string(body), -1)
	if len(refs) < 2 {
		t.Fatalf("index.html references %d assets, want the script and the style sheet", len(refs))
	}
	for _, ref := range refs {
		if resp, _ := get(t, dashboard.Path+ref[1], ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", ref[1], resp.Status)
		}
	}
	external := regexp.MustCompile(`(?i:(https?:)?//[a-z0-9.-]+\.[a-z]{2,})|@import|url\(`)
	files, err := filepath.Glob("assets/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("list assets: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		path := dashboard.Path + f
		if filepath.Base(f) == "index.html" {
			path = dashboard.Path
		}
		resp, served := get(t, path, "")
		if resp.StatusCode != http.StatusOK || string(served) != string(data) {
			t.Errorf("GET %s: %s, want the embedded file", f, resp.Status)
		}
		if strings.HasSuffix(f, ".js") && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
			t.Errorf("GET %s: Content-Type %q, want JavaScript (modules need it)", f, resp.Header.Get("Content-Type"))
		}
		// An SVG's xmlns names a namespace; nothing is fetched from it.
		data = regexp.MustCompile(`xmlns="[^"]*"`).ReplaceAll(data, nil)
		if m := external.Find(data); m != nil {
			t.Errorf("%s references something outside the binary: %q", f, m)
		}
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		path, token string
		code        int
		location    string
	}{
		{path: "/dashboard", code: http.StatusTemporaryRedirect, location: "/dashboard/"},
		{path: "/dashboard/nothing-here", code: http.StatusNotFound},
		{path: "/dashboard/assets/missing.js", code: http.StatusNotFound},
		{path: "/dashboard/assets/", code: http.StatusNotFound},
		// The dashboard opens no hole in the API.
		{path: "/api/v1/nodes", code: http.StatusUnauthorized},
		{path: "/api/v1/nodes", token: up.AdminToken, code: http.StatusOK},
	} {
		resp, _ := get(t, tc.path, tc.token)
		if resp.StatusCode != tc.code {
			t.Errorf("GET %s: %s, want %d", tc.path, resp.Status, tc.code)
		}
		if loc := resp.Header.Get("Location"); loc != tc.location {
			t.Errorf("GET %s: Location %q, want %q", tc.path, loc, tc.location)
		}
	}
}

// status decodes a metav1.Status answer.
func status(t *testing.T, body []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("answer is not a Status (%v): %s", err, body)
	}
	return st
}

func TestExplainNeedsAToken(t *testing.T) {
	for _, tc := range []struct {
		name, header string
	}{
		{"no header", ""},
		{"empty bearer", "Bearer "},
		{"basic auth", "Basic YWRtaW46YWRtaW4="},
		{"unknown token", "Bearer not-a-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(callCtx(t), http.MethodGet, up.URL+dashboard.ExplainPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, body := do(t, req)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s: %s %s", tc.name, resp.Status, body)
			}
			if st := status(t, body); st.Reason != metav1.StatusReasonUnauthorized {
				t.Errorf("reason %q, want Unauthorized", st.Reason)
			}
		})
	}
}

func TestExplainOnlyGets(t *testing.T) {
	req, err := http.NewRequestWithContext(callCtx(t), http.MethodPost, up.URL+dashboard.ExplainPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+up.AdminToken)
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %s, Allow %q: %s", resp.Status, resp.Header.Get("Allow"), body)
	}
}

func TestExplainRejectsBadQueries(t *testing.T) {
	for _, tc := range []struct {
		name, query, want string
	}{
		{"unknown parameter", "pod=a", `unknown query parameter "pod"`},
		{"name without namespace", "name=a", `name "a" needs a namespace`},
		{"bad namespace", "namespace=Not_A_Label", `namespace "Not_A_Label"`},
		{"bad name", "namespace=default&name=a..b", `name "a..b"`},
		{"repeated parameter", "namespace=a&namespace=b", `"namespace" is given 2 times`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, dashboard.ExplainPath+"?"+tc.query, up.AdminToken)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s: %s", resp.Status, body)
			}
			if st := status(t, body); !strings.Contains(st.Message, tc.want) {
				t.Errorf("message %q, want it to say %q", st.Message, tc.want)
			}
		})
	}
}
