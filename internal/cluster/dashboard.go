package cluster

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/dashboard"
)

// withDashboard serves the web dashboard under dashboard.Path beside the
// API, on the same origin, and the API everywhere else. The dashboard
// reaches the API server at url (verified with caPEM) with each caller's
// own token.
func withDashboard(api http.Handler, o Options, url string, caPEM []byte) (http.Handler, error) {
	dash, err := dashboard.New(dashboard.Options{
		API:           &rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}},
		ScoreStrategy: o.Scheduler.ScoreStrategy,
		Logger:        o.Logger.With("component", "dashboard"),
	})
	if err != nil {
		return nil, fmt.Errorf("set up the dashboard: %w", err)
	}
	prefix := strings.TrimSuffix(dashboard.Path, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == prefix || strings.HasPrefix(p, dashboard.Path) {
			dash.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	}), nil
}
