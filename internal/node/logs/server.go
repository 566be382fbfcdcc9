// Package logs serves container logs from the node agent's root directory
// over HTTP, for the API server's pods/log proxy:
//
//	GET /containerLogs/NAMESPACE/POD/CONTAINER?follow=&tailLines=&previous=&limitBytes=
//
// The log of a container's current attempt is served, or with previous=true
// the attempt before it. tailLines starts that many lines from the end,
// limitBytes stops after that many bytes. follow keeps the response open
// like tail -f and ends once the attempt has stopped and everything it
// wrote was sent, when the container restarts (a new attempt), or when the
// client goes. timestamps and sinceSeconds are accepted and ignored: the
// runtimes write raw output without per-line times.
//
// Every request but /healthz must come from the API server, identified by
// its client certificate (pki.NodeClientName, verified against the
// cluster CA by the TLS server the agent runs), or carry "Authorization:
// Bearer TOKEN" with one of the configured tokens (operators reading the
// agent directly), unless anonymous access is allowed. The API server's
// certificate is accepted for these GET endpoints only: its logs of the
// pods this agent runs and its metrics.
package logs

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"allot.dev/allot/internal/node/podfiles"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/pki"
)

// Lookup finds the pod NAMESPACE/NAME on the node.
type Lookup func(namespace, name string) (*pods.Snapshot, bool)

// Options configure the handler.
type Options struct {
	// RootDir is the agent's root directory (package podfiles).
	RootDir string
	Lookup  Lookup
	// Tokens are the bearer tokens accepted.
	Tokens []string
	// AllowAnonymous serves requests without a valid token; only for
	// agents listening on loopback.
	AllowAnonymous bool
	// FollowPoll is how often a followed log is checked for new output
	// (default 200ms).
	FollowPoll time.Duration
	// Metrics, if set, is served at /metrics.
	Metrics http.Handler
	Logger  *slog.Logger
}

type handler struct {
	o      Options
	tokens [][sha256.Size]byte
}

// NewHandler returns the log server's HTTP handler.
func NewHandler(o Options) http.Handler {
	if o.FollowPoll <= 0 {
		o.FollowPoll = 200 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{o: o}
	for _, t := range o.Tokens {
		if t != "" {
			h.tokens = append(h.tokens, sha256.Sum256([]byte(t)))
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.Handle("GET /containerLogs/{namespace}/{pod}/{container}", h.authenticated(http.HandlerFunc(h.serveLogs)))
	if o.Metrics != nil {
		mux.Handle("GET /metrics", h.authenticated(o.Metrics))
	}
	return mux
}

func (h *handler) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.o.AllowAnonymous && !h.validToken(r) && !fromAPIServer(r) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fromAPIServer reports whether the request came over TLS with the API
// server's client certificate, verified against the cluster CA.
func fromAPIServer(r *http.Request) bool {
	return r.TLS != nil && pki.IsNodeClient(r.TLS.VerifiedChains)
}

func (h *handler) validToken(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := 0
	for _, t := range h.tokens {
		found |= subtle.ConstantTimeCompare(sum[:], t[:])
	}
	return found == 1
}

// logRequest is a parsed /containerLogs query.
type logRequest struct {
	namespace, pod, container string
	follow, previous          bool
	tailLines                 int64 // < 0: whole log
	limitBytes                int64 // < 0: no limit
}

func parseLogRequest(r *http.Request) (logRequest, error) {
	q := r.URL.Query()
	lr := logRequest{
		namespace: r.PathValue("namespace"), pod: r.PathValue("pod"), container: r.PathValue("container"),
		tailLines: -1, limitBytes: -1,
	}
	var err error
	if lr.follow, err = boolParam(q.Get("follow")); err != nil {
		return lr, fmt.Errorf("follow: %w", err)
	}
	if lr.previous, err = boolParam(q.Get("previous")); err != nil {
		return lr, fmt.Errorf("previous: %w", err)
	}
	if v := q.Get("tailLines"); v != "" {
		if lr.tailLines, err = strconv.ParseInt(v, 10, 64); err != nil || lr.tailLines < 0 {
			return lr, fmt.Errorf("tailLines must be a non-negative integer")
		}
	}
	if v := q.Get("limitBytes"); v != "" {
		if lr.limitBytes, err = strconv.ParseInt(v, 10, 64); err != nil || lr.limitBytes < 1 {
			return lr, fmt.Errorf("limitBytes must be a positive integer")
		}
	}
	return lr, nil
}

func boolParam(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}

func (h *handler) serveLogs(w http.ResponseWriter, r *http.Request) {
	lr, err := parseLogRequest(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	snap, ok := h.o.Lookup(lr.namespace, lr.pod)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %s/%s is not on this node", lr.namespace, lr.pod), http.StatusNotFound)
		return
	}
	cs, ok := snap.Containers[lr.container]
	if !ok {
		http.Error(w, fmt.Sprintf("container %q is not valid for pod %q", lr.container, lr.pod), http.StatusNotFound)
		return
	}
	attempt := cs.Attempt
	if lr.previous {
		attempt--
		if attempt < 0 {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", lr.container, lr.pod), http.StatusBadRequest)
			return
		}
	}
	f, err := os.Open(podfiles.LogPath(h.o.RootDir, snap.Key, lr.container, attempt))
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, fmt.Sprintf("container %q in pod %q has no log yet (waiting to start)", lr.container, lr.pod), http.StatusBadRequest)
		return
	}
	if err != nil {
		http.Error(w, "open log: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	if err := h.stream(w, r, f, lr, snap, attempt); err != nil {
		h.o.Logger.Debug("stream log", "pod", lr.namespace+"/"+lr.pod, "container", lr.container, "err", err)
	}
}
