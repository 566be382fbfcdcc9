package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"allot.dev/allot/internal/apiserver"
	"allot.dev/allot/internal/storage"
)

// env is an etcd (embedded, fsync on, as in production) with an API
// server in front of it, served over TLS.
type env struct {
	store  *storage.Store
	api    *apiserver.Server
	srv    *httptest.Server
	client *http.Client
}

func newEnv(b *testing.B) *env {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	quiet := slog.New(slog.DiscardHandler)
	e, err := storage.StartEmbedded(ctx, storage.EmbeddedConfig{DataDir: b.TempDir(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	// Raw etcd is measured through a regular gRPC client; the API server
	// talks to its embedded member in-process, as allot up does.
	c, err := storage.NewClient(ctx, e.Endpoints(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	st := storage.New(c)
	inproc := e.InProcessClient()
	b.Cleanup(func() { _ = inproc.Close() })
	api := apiserver.New(apiserver.Config{Store: storage.New(inproc), Logger: quiet})
	if err := api.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := api.EnsureNamespaces(ctx, "default"); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(api.Handler())
	srv.EnableHTTP2 = true
	srv.StartTLS()
	b.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // test server
	return &env{store: st, api: api, srv: srv, client: &http.Client{Transport: tr}}
}

func (e *env) post(path string, body []byte) error {
	res, err := e.client.Post(e.srv.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST %s: %d", path, res.StatusCode)
	}
	return nil
}

// smallPod is a pod of about 300 bytes as stored.
func smallPod(name string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name +
		`","labels":{"app":"bench"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)
}

// objectCount is the size of the big benchmarks (ALLOT_BENCH_OBJECTS).
func objectCount(def int) int {
	if v, err := strconv.Atoi(os.Getenv("ALLOT_BENCH_OBJECTS")); err == nil && v > 0 {
		return v
	}
	return def
}

// percentile returns the p-th percentile (0..1) of sorted durations.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(p * float64(len(d)-1))
	return d[i]
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
