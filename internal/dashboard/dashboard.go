package dashboard

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/scheduler/plugins/noderesources"
)

// Paths the handler serves.
const (
	// Path is the dashboard page; mount the handler on it.
	Path = "/dashboard/"
	// ExplainPath answers why pods are pending, as JSON.
	ExplainPath = Path + "api/explain"
)

// Defaults of Options.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxExplained = 100
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy allows the page only its own scripts, styles and
// API: no inline script, no other origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// Options configure the handler.
type Options struct {
	// API is how the explain endpoint reaches the API server: its address
	// and TLS settings. Credentials in it are ignored; each request uses
	// the caller's own bearer token. Required.
	API *rest.Config
	// ScoreStrategy is the scheduler's, so that explanations score nodes
	// as it does ("" is LeastAllocated).
	ScoreStrategy noderesources.Strategy
	// Timeout bounds each API call of an explanation and its diagnosis
	// (default DefaultTimeout).
	Timeout time.Duration
	// MaxExplained bounds how many pending pods one request explains
	// (default DefaultMaxExplained); the answer says when it left some
	// out.
	MaxExplained int
	// Logger; nil is slog.Default().
	Logger *slog.Logger
}

// New returns the dashboard's handler, to be mounted at Path on the API
// server's origin.
func New(o Options) (http.Handler, error) {
	if o.API == nil || o.API.Host == "" {
		return nil, errors.New("dashboard: Options.API: the API server's address is required")
	}
	if _, err := noderesources.ParseStrategy(string(o.ScoreStrategy)); err != nil {
		return nil, fmt.Errorf("dashboard: Options.ScoreStrategy: %w", err)
	}
	if o.Timeout < 0 || o.MaxExplained < 0 {
		return nil, errors.New("dashboard: Options.Timeout and Options.MaxExplained must not be negative")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxExplained == 0 {
		o.MaxExplained = DefaultMaxExplained
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("dashboard: open embedded assets: %w", err)
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: read embedded index: %w", err)
	}
	e := &explainer{opts: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path+"{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(index)
	})
	fileServer := http.StripPrefix(Path+"assets/", http.FileServerFS(files))
	mux.HandleFunc("GET "+Path+"assets/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
			http.NotFound(w, r)
			return
		}
		fileServer.ServeHTTP(w, r)
	})
	mux.Handle(ExplainPath, e)
	mux.HandleFunc(Path, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "the dashboard has no page "+r.URL.Path, http.StatusNotFound)
	})
	return withHeaders(mux), nil
}

// withHeaders sets what every answer carries: a strict content security
// policy, no MIME sniffing, no referrer, and no caching (the assets change
// with the binary, the answers with the cluster).
func withHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}

// LoginURL is the dashboard's address on the API server at server (for
// example https://127.0.0.1:6443) with a login token in the fragment,
// form-encoded: opening it logs in, and the token is never sent in a
// request.
func LoginURL(server, token string) string {
	return strings.TrimSuffix(server, "/") + Path + "#token=" + url.QueryEscape(token)
}
