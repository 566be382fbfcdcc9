package node

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/internal/pki"
	"allot.dev/allot/pkg/client"
)

// fakeIssuer stands in for the API server's certificate endpoint (the far
// side of the agent's process boundary): it issues with the cluster CA for
// the addresses it is told the request proved.
type fakeIssuer struct {
	ca *pki.CA
	mu sync.Mutex
	// ips are the addresses granted; notBefore backdates a certificate
	// (so that it ends soon).
	ips       []net.IP
	age       time.Duration
	requests  int
	issueNode string // the name issued for; "" is the requested node
	refuse    int    // answer this many requests 503 first
}

func (f *fakeIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if f.refuse > 0 {
		f.refuse--
		http.Error(w, "not yet", http.StatusServiceUnavailable)
		return
	}
	node := f.issueNode
	if node == "" {
		node = r.PathValue("node")
	}
	body, _ := io.ReadAll(r.Body)
	cert, err := f.ca.IssueNodeServingCert(body, node, f.ips, time.Now().Add(-f.age))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusCreated)
	w.Write(cert)
}

func (f *fakeIssuer) set(fn func(*fakeIssuer)) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
	return f.requests
}

// TestServingCertKeptAndRenewed: the agent's serving certificate is
// requested once, kept across restarts (a new servingCert over the same
// root), and requested again when the node's address is not in it, when it
// ends within NodeRenewBefore, and when it names another node.
func TestServingCertKeptAndRenewed(t *testing.T) {
	ca, err := pki.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	loop := net.ParseIP("127.0.0.1")
	f := &fakeIssuer{ca: ca, ips: []net.IP{loop}}
	mux := http.NewServeMux()
	mux.Handle("POST "+pki.NodeCertificatePath("{node}"), f)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	rc := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM()}}
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := func(want ...net.IP) *servingCert {
		t.Helper()
		sc, err := newServingCert(root, "n1", rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.ensure(ctx, want); err != nil {
			t.Fatal(err)
		}
		return sc
	}
	requests := func() int { return f.set(func(*fakeIssuer) {}) }

	first := start(loop)
	if n := requests(); n != 1 {
		t.Fatalf("first start: %d requests, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(root, "pki", servingKeyFile)); err != nil {
		t.Fatalf("key not kept: %v", err)
	}

	again := start(loop)
	if n := requests(); n != 1 {
		t.Fatalf("restart: %d requests, want the kept certificate used", n)
	}
	if a, b := first.cur.Load().Leaf.SerialNumber, again.cur.Load().Leaf.SerialNumber; a.Cmp(b) != 0 {
		t.Fatalf("restart: serial %s, was %s", b, a)
	}

	moved := net.ParseIP("10.1.2.3")
	f.set(func(f *fakeIssuer) { f.ips = []net.IP{moved, loop} })
	sc := start(moved)
	if n := requests(); n != 2 {
		t.Fatalf("address changed: %d requests, want 2", n)
	}
	if ips := sc.cur.Load().Leaf.IPAddresses; len(ips) == 0 || !ips[0].Equal(moved) {
		t.Fatalf("new certificate for %v, want %s", ips, moved)
	}

	// A certificate that ends within NodeRenewBefore is replaced.
	f.set(func(f *fakeIssuer) { f.age = pki.NodeServingValidity - pki.NodeRenewBefore/2 })
	start(moved) // still valid: kept
	if n := requests(); n != 2 {
		t.Fatalf("valid certificate: %d requests, want 2", n)
	}
	if err := os.Remove(filepath.Join(root, "pki", servingCertFile)); err != nil {
		t.Fatal(err)
	}
	start(moved) // none: one that ends soon is issued...
	f.set(func(f *fakeIssuer) { f.age = 0 })
	sc = start(moved) // ...and replaced at the next start
	if n := requests(); n != 4 {
		t.Fatalf("ending certificate: %d requests, want 4", n)
	}
	if end := sc.cur.Load().Leaf.NotAfter; time.Until(end) < pki.NodeRenewBefore {
		t.Fatalf("certificate still ends at %s", end)
	}

	// A certificate for another node's name is not used.
	if err := os.Remove(filepath.Join(root, "pki", servingCertFile)); err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeIssuer) { f.issueNode = "n2" })
	other, err := newServingCert(root, "n1", rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.ensure(ctx, []net.IP{moved}); err == nil {
		t.Fatal("a certificate issued for n2 was accepted by n1")
	}
	f.set(func(f *fakeIssuer) { f.issueNode = "" })
	start(moved)
	if n := requests(); n != 6 {
		t.Fatalf("after a certificate for another node: %d requests, want 6", n)
	}
}

// TestListenRetriesCertificate: an agent whose API server cannot issue its
// certificate yet (down, starting) retries, as registration does, and then
// serves TLS with the certificate.
func TestListenRetriesCertificate(t *testing.T) {
	ca, err := pki.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeIssuer{ca: ca, ips: []net.IP{net.ParseIP("127.0.0.1")}, refuse: 1}
	mux := http.NewServeMux()
	mux.Handle("POST "+pki.NodeCertificatePath("{node}"), f)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := client.NewForConfig(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca.CertPEM()}})
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := fake.New(fake.Options{})
	a, err := New(Config{NodeName: "n1", Client: c, Runtime: rt, RootDir: t.TempDir(), NodeIP: "127.0.0.1", LogListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.listen(ctx); err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer a.closeListener()
	if n := f.set(func(*fakeIssuer) {}); n != 2 {
		t.Fatalf("%d certificate requests, want 2 (one refused, one retried)", n)
	}
	go func() {
		conn, err := a.listener.Accept()
		if err == nil {
			_ = conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	conn, err := tls.Dial("tcp", a.listener.Addr().String(), &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS to the log server: %v", err)
	}
	defer conn.Close()
	if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != pki.NodeServingName("n1") {
		t.Fatalf("log server certificate for %q", cn)
	}
}
