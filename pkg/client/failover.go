package client

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// WithFailover makes every client built from rc use the API servers at
// servers (URLs such as https://10.0.0.1:6443; the first is tried first)
// and move to the next when one cannot be reached, as a k3s agent's
// client-side load balancer does: API servers are stateless over one
// etcd, so any of them serves any request. A request moves on when
// connecting to a server fails (it was never sent) or the server answers
// 503 (it did not act on it); it stays on the server that answered
// otherwise, and later requests go to that server until it fails. A
// request cut after it was sent (a reset, a lost watch) is not sent again
// here: the caller sees the error as from one server, and its retry (an
// informer's re-watch, for one) goes to the next server.
//
// The servers share the cluster's CA (rc's) and each has a serving
// certificate for its own address. log (nil: slog's default) hears of
// every switch.
func WithFailover(rc *rest.Config, servers []string, log *slog.Logger) error {
	if len(servers) == 0 {
		return nil
	}
	var urls []*url.URL
	for i, s := range servers {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("API server %d %q: want a URL such as https://10.0.0.1:6443", i, s)
		}
		urls = append(urls, u)
	}
	if log == nil {
		log = slog.Default()
	}
	rc.Host = urls[0].String()
	st := &failoverState{servers: urls, log: log}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &failover{next: rt, failoverState: st} })
	return nil
}

// failoverState is shared by every client of one config: the server they
// use now.
type failoverState struct {
	servers []*url.URL
	cur     atomic.Int32
	log     *slog.Logger
}

type failover struct {
	next http.RoundTripper
	*failoverState
}

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	start := int(f.cur.Load())
	var firstErr error
	for i := range f.servers {
		idx := (start + i) % len(f.servers)
		r, err := f.onServer(req, idx, i > 0)
		if err != nil {
			return nil, err
		}
		resp, err := f.next.RoundTrip(r)
		switch {
		case err == nil && resp.StatusCode != http.StatusServiceUnavailable:
			if idx != start && f.cur.CompareAndSwap(int32(start), int32(idx)) {
				f.log.Warn("API server unreachable; using another", "from", f.servers[start].Host, "to", f.servers[idx].Host)
			}
			return resp, nil
		case err == nil: // 503: not served there; the last server's answer is returned as is
			if i == len(f.servers)-1 {
				return resp, nil
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
		case !notSent(err):
			return nil, err
		case firstErr == nil:
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = errors.New("no API server answered")
	}
	return nil, firstErr
}

// onServer returns req aimed at server idx; again says the body must be
// read anew (a retry).
func (f *failover) onServer(req *http.Request, idx int, again bool) (*http.Request, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host = f.servers[idx].Scheme, f.servers[idx].Host
	r.Host = ""
	if again && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, fmt.Errorf("%s %s: API server unreachable, and the request body cannot be sent to %s", req.Method, req.URL.Path, f.servers[idx].Host)
		}
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	}
	return r, nil
}

// notSent reports whether err happened before the request reached the
// server: the connection could not be made.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
