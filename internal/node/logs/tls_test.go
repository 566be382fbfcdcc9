package logs

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"allot.dev/allot/internal/pki"
)

// TestAPIServerClientCertificate: over the agent's TLS (client
// certificates verified against the cluster CA when given), the API
// server's client certificate is accepted without a token; no certificate
// and no token is refused, and so is a look-alike certificate of another
// CA.
func TestAPIServerClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, csrPEM, err := pki.NewNodeKeyCSR("n1")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.IssueNodeServingCert(csrPEM, "n1", []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	plain, _, _ := newTestServer(t, false)
	srv := httptest.NewUnstartedServer(plain.Config.Handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool()}
	srv.StartTLS()
	defer srv.Close()

	apiserver, err := ca.EnsureNodeClientCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := pki.EnsureCA(t.TempDir() + "/other")
	if err != nil {
		t.Fatal(err)
	}
	lookalike, err := otherCA.EnsureNodeClientCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fetchWith := func(cert *tls.Certificate) (int, string, error) {
		cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := c.Get(srv.URL + "/containerLogs/ns/p/c")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	if code, body, err := fetchWith(&apiserver); err != nil || code != 200 || body != "one\ntwo\nthree\n" {
		t.Errorf("with the API server's certificate: %d %q %v, want the log", code, body, err)
	}
	if code, _, err := fetchWith(nil); err != nil || code != 401 {
		t.Errorf("without certificate or token: %d %v, want 401", code, err)
	}
	if code, _, err := fetchWith(&lookalike); err == nil {
		t.Errorf("with %s's certificate of another CA: %d, want the handshake refused", pki.NodeClientName, code)
	}
}
