package apiserver

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// /metrics serves the registries of the in-process components beside the
// API server's own, to authenticated callers only.
func TestMetricsServesComponentRegistries(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "component_things_total", Help: "Things."})
	reg.MustRegister(c)
	c.Add(3)
	srv := httptest.NewServer(New(Config{Store: testStore, Authenticator: testUsers, Logger: slog.New(slog.DiscardHandler),
		Metrics: []prometheus.Gatherer{reg}}).Handler())
	defer srv.Close()
	get := func(token string) (int, string) {
		req, err := http.NewRequest("GET", srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("read /metrics: %v", err)
		}
		return res.StatusCode, string(body)
	}
	get("admin") // one request, so apiserver_request_total has a series
	code, body := get("admin")
	if code != http.StatusOK {
		t.Fatalf("admin GET /metrics = %d: %s", code, body)
	}
	for _, want := range []string{"component_things_total 3", "apiserver_request_total{", "go_goroutines "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := get("nobody"); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("anonymous GET /metrics = %d, want 401 or 403", code)
	}
}
