package apiserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/pki"

	corev1 "allot.dev/allot/api/core/v1"
)

// nodeTLSEnv is an API server with a cluster CA (NodeTLS) over the tests'
// store, served on 127.0.0.1.
type nodeTLSEnv struct {
	t      *testing.T
	url    string
	ca     *pki.CA
	ns     string
	users  fakeAuthn
	client tls.Certificate
}

var nodeTLSSeq atomic.Int64

func newNodeTLSEnv(t *testing.T, users fakeAuthn) *nodeTLSEnv {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.EnsureNodeClientCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &nodeTLSEnv{t: t, ca: ca, ns: newNamespace(t), users: users, client: client}
	e.url = e.server(dir + "/nodes")
	return e
}

// server starts an API server over the tests' store with the env's CA,
// client certificate and users, keeping node certificates in certDir,
// and returns its URL.
func (e *nodeTLSEnv) server(certDir string) string {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	srv := New(Config{Store: testStore, Authenticator: e.users, Logger: slog.New(slog.DiscardHandler),
		NodeTLS: &NodeTLS{CA: e.ca, CertDir: certDir, ClientCert: e.client}})
	if err := srv.Start(ctx); err != nil {
		e.t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	e.t.Cleanup(hs.Close)
	return hs.URL
}

func (e *nodeTLSEnv) call(token, method, path string, body []byte) resp {
	e.t.Helper()
	return e.callAt(e.url, token, method, path, body)
}

func (e *nodeTLSEnv) callAt(url, token, method, path string, body []byte) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, url+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, data}
}

// certificate has the API server issue node's serving certificate, asked
// with token, and returns it with its key.
func (e *nodeTLSEnv) certificate(token, node string) tls.Certificate {
	e.t.Helper()
	keyPEM, csrPEM, err := pki.NewNodeKeyCSR(node)
	if err != nil {
		e.t.Fatal(err)
	}
	r := e.call(token, "POST", pki.NodeCertificatePath(node), csrPEM)
	expect(e.t, r, 201, "BEGIN CERTIFICATE")
	c, err := tls.X509KeyPair(r.body, keyPEM)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// fakeAgent is the far side of the API server's log proxy: a TLS server
// with cert that answers requests carrying the API server's client
// certificate; it counts the requests that reached it.
type fakeAgent struct {
	port     int
	requests atomic.Int64
}

func (e *nodeTLSEnv) startAgent(ln net.Listener, cert *tls.Certificate) *fakeAgent {
	e.t.Helper()
	a := &fakeAgent{port: ln.Addr().(*net.TCPAddr).Port}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.requests.Add(1)
		if r.TLS == nil || !pki.IsNodeClient(r.TLS.VerifiedChains) {
			http.Error(w, "not the API server", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "log of "+r.URL.Path+"\n")
	})
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	if cert != nil {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*cert},
			ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: e.ca.Pool()})
	}
	go srv.Serve(ln)
	e.t.Cleanup(func() { srv.Close() })
	return a
}

// node creates the Node with the InternalIP and port in its status, and a
// pod bound to it.
func (e *nodeTLSEnv) node(name, ip string, port int) {
	e.t.Helper()
	n := makeNode(name, nil)
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	expect(e.t, e.call("admin", "POST", "/api/v1/nodes", mustJSON(e.t, n)), 201)
	e.t.Cleanup(func() { e.call("admin", "DELETE", "/api/v1/nodes/"+name, nil) })
	expect(e.t, e.call("admin", "POST", "/api/v1/namespaces/"+e.ns+"/pods", mustJSON(e.t, makePod("on-"+name).node(name).obj())), 201)
}

func (e *nodeTLSEnv) logs(node string) resp {
	e.t.Helper()
	return e.call("admin", "GET", "/api/v1/namespaces/"+e.ns+"/pods/on-"+node+"/log", nil)
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestNodeLogsOverTLS: the API server reaches a node agent over TLS,
// verifying the serving certificate the cluster CA issued for the node's
// name and addresses, and presents its client certificate; it refuses an
// agent with another node's certificate or without TLS, and never
// connects to an address only written into the Node's status.
func TestNodeLogsOverTLS(t *testing.T) {
	seq := strconv.FormatInt(nodeTLSSeq.Add(1), 10)
	good, forged, other, plain, nocert := "tls-good-"+seq, "tls-forged-"+seq, "tls-other-"+seq, "tls-plain-"+seq, "tls-nocert-"+seq
	users := fakeAuthn{"admin": {Name: "admin", Role: auth.RoleAdmin}, "user": {Name: "alice", Role: auth.RoleUser},
		"driver": {Name: "gpu.example.com", Role: auth.RoleDriver}, "ndriver": {Name: "gpu.example.com@" + good, Role: auth.RoleNodeDriver}}
	for _, n := range []string{good, forged, other, plain, nocert} {
		users["node-"+n] = auth.User{Name: n, Role: auth.RoleNode}
	}
	e := newNodeTLSEnv(t, users)

	t.Run("issuance is the node's own", func(t *testing.T) {
		_, csr, err := pki.NewNodeKeyCSR(good)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, e.call("node-"+forged, "POST", pki.NodeCertificatePath(good), csr), 403, "only that node's own credential")
		for _, tok := range []string{"user", "driver", "ndriver"} {
			expect(t, e.call(tok, "POST", pki.NodeCertificatePath(good), csr), 403)
		}
		expect(t, e.call("admin", "POST", pki.NodeCertificatePath(good), csr), 201)
		expect(t, e.call("", "POST", pki.NodeCertificatePath(good), csr), 401)
		expect(t, e.call("node-"+good, "POST", pki.NodeCertificatePath(good), []byte("not a request")), 400, "CERTIFICATE REQUEST")
		expect(t, e.call("node-"+good, "POST", pki.NodeCertificatePath("Bad_Name"), csr), 400, "Bad_Name")
	})

	// The request came from 127.0.0.1: the certificate is for loopback.
	goodCert := e.certificate("node-"+good, good)
	if got := goodCert.Leaf.IPAddresses; len(got) == 0 || !got[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Fatalf("certificate addresses %v, want 127.0.0.1 (the request's peer) first", got)
	}

	t.Run("verified agent", func(t *testing.T) {
		a := e.startAgent(listen(t, "127.0.0.1:0"), &goodCert)
		e.node(good, "127.0.0.1", a.port)
		expect(t, e.logs(good), 200, "log of /containerLogs/"+e.ns+"/on-"+good+"/c")
	})

	// API servers over one etcd share the certificates they issued: a
	// second server, with the same CA and its own (empty) certificate
	// directory, reaches the node whose certificate the first issued.
	t.Run("shared between API servers", func(t *testing.T) {
		name := good + "-shared"
		c := e.certificate("admin", name) // issued by the first server
		a := e.startAgent(listen(t, "127.0.0.1:0"), &c)
		e.node(name, "127.0.0.1", a.port)
		second := e.server(t.TempDir())
		expect(t, e.callAt(second, "admin", "GET", "/api/v1/namespaces/"+e.ns+"/pods/on-"+name+"/log", nil), 200, "log of /containerLogs/")
		if n := a.requests.Load(); n != 1 {
			t.Fatalf("the agent saw %d requests, want 1", n)
		}
	})

	t.Run("forged address not followed", func(t *testing.T) {
		// The Node claims 127.0.0.2, an address its certificate does not
		// hold; something listens there, counting connections. The agent
		// listens on the same port of 127.0.0.1, an address of its
		// certificate.
		var fake net.Listener
		var agentLn net.Listener
		for range 20 {
			fake = listen(t, "127.0.0.2:0")
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(fake.Addr().(*net.TCPAddr).Port)))
			if err == nil {
				agentLn = l
				t.Cleanup(func() { l.Close() })
				break
			}
			fake.Close()
		}
		if agentLn == nil {
			t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
		}
		var accepts atomic.Int64
		go func() {
			for {
				c, err := fake.Accept()
				if err != nil {
					return
				}
				accepts.Add(1)
				c.Close()
			}
		}()
		c := e.certificate("node-"+forged, forged)
		a := e.startAgent(agentLn, &c)
		e.node(forged, "127.0.0.2", a.port)
		expect(t, e.logs(forged), 200, "log of")
		expect(t, e.logs(forged), 200, "log of")
		// The API server picks the address before it dials, within the
		// request: two whole requests, answered by the certified address,
		// are the time it had to connect to the forged one.
		if n := accepts.Load(); n != 0 {
			t.Fatalf("the API server connected %d times to 127.0.0.2, an address only written into the Node's status", n)
		}
		if a.requests.Load() != 2 {
			t.Fatalf("agent on the certified address saw %d requests, want 2", a.requests.Load())
		}
	})

	t.Run("another node's certificate refused", func(t *testing.T) {
		e.certificate("node-"+other, other) // other has a certificate of its own on file
		a := e.startAgent(listen(t, "127.0.0.1:0"), &goodCert)
		e.node(other, "127.0.0.1", a.port)
		expect(t, e.logs(other), 503, "system:node:"+good)
		if n := a.requests.Load(); n != 0 {
			t.Fatalf("the agent with %s's certificate got %d requests", good, n)
		}
	})

	t.Run("plain HTTP refused", func(t *testing.T) {
		e.certificate("node-"+plain, plain)
		a := e.startAgent(listen(t, "127.0.0.1:0"), nil)
		e.node(plain, "127.0.0.1", a.port)
		expect(t, e.logs(plain), 503, "reach node "+plain)
		if n := a.requests.Load(); n != 0 {
			t.Fatalf("the plain-HTTP agent got %d requests", n)
		}
	})

	t.Run("no certificate issued", func(t *testing.T) {
		a := e.startAgent(listen(t, "127.0.0.1:0"), &goodCert)
		e.node(nocert, "127.0.0.1", a.port)
		expect(t, e.logs(nocert), 503, "no serving certificate")
		if n := a.requests.Load(); n != 0 {
			t.Fatalf("the agent of a node without a certificate got %d requests", n)
		}
	})
}
