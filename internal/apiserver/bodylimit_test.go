package apiserver

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
)

// A body over the limit that an HTTP/1.1 client sends whole over TLS gets
// 413 with a Status naming the limit, and the connection stays usable:
// the same client's next request reuses it (one dial, GotConn.Reused).
// Both a body of known length and a chunked one.
func TestOversizedBodyGets413AndKeepsTheConnection(t *testing.T) {
	srv := httptest.NewUnstartedServer(testAPI.Handler())
	srv.StartTLS() // HTTP/1.1: EnableHTTP2 is off
	defer srv.Close()
	var dials atomic.Int32
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = false
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()

	ns := newNamespace(t)
	pods := srv.URL + "/api/v1/namespaces/" + ns + "/pods"
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`
	huge := pod[:40] + strings.Repeat(" ", 10<<20) + pod[40:]

	do := func(method, url string, body io.Reader) (*http.Response, []byte, bool) {
		t.Helper()
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer admin")
		req.Header.Set("Content-Type", "application/json")
		var reused bool
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("read answer: %v", err)
		}
		return res, data, reused
	}
	for i, body := range []io.Reader{
		strings.NewReader(huge),                 // Content-Length
		io.MultiReader(strings.NewReader(huge)), // chunked
	} {
		res, data, _ := do("POST", pods, body)
		if res.StatusCode != 413 || !bytes.Contains(data, []byte(`"reason":"RequestEntityTooLarge"`)) || !bytes.Contains(data, []byte("limit of 3145728 bytes")) {
			t.Fatalf("body %d: got %d %s, want 413 with a Status naming the limit", i, res.StatusCode, data)
		}
		res, data, reused := do("GET", pods, nil)
		if res.StatusCode != 200 || !reused {
			t.Fatalf("body %d: next request: %d (reused connection %v) %.200s, want 200 on the same connection", i, res.StatusCode, reused, data)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1: the 413 closed the connection", n)
	}
	if res, _, _ := do("GET", pods+"/big", nil); res.StatusCode != 404 {
		t.Fatalf("oversized pod stored: %d", res.StatusCode)
	}
}
