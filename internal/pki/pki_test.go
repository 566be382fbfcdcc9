package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustCA(t *testing.T, dir string) *CA {
	t.Helper()
	ca, err := EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %#o, want %#o", filepath.Base(path), got, want)
	}
}

func TestEnsureCACreatesThenLoads(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca := mustCA(t, dir)
	wantMode(t, filepath.Join(dir, CAKeyFile), 0o600)
	wantMode(t, filepath.Join(dir, CACertFile), 0o644)
	if !bytes.Equal(ca.CertPEM(), readFile(t, filepath.Join(dir, CACertFile))) {
		t.Errorf("CertPEM differs from ca.crt")
	}
	cert, err := parseCertPEM(ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	if !cert.IsCA || cert.NotAfter.Before(time.Now().Add(9*365*24*time.Hour)) {
		t.Errorf("CA: IsCA=%v NotAfter=%s, want a CA valid ~10 years", cert.IsCA, cert.NotAfter)
	}
	if k, ok := ca.key.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("CA key is %T, want ECDSA P-256", ca.key)
	}

	again := mustCA(t, dir)
	if !bytes.Equal(again.CertPEM(), ca.CertPEM()) {
		t.Errorf("reload produced a different CA")
	}
	again.CertPEM()[0] = 'x'
	if again.CertPEM()[0] == 'x' {
		t.Errorf("CertPEM returned shared memory")
	}
}

func TestEnsureCAFailures(t *testing.T) {
	cases := map[string]struct {
		prepare func(t *testing.T, dir string)
		wantErr string
	}{
		"key missing": {
			prepare: func(t *testing.T, dir string) { remove(t, filepath.Join(dir, CAKeyFile)) },
			wantErr: "ca.key is missing",
		},
		"key of another CA": {
			prepare: func(t *testing.T, dir string) {
				other := t.TempDir()
				mustCA(t, other)
				copyFile(t, filepath.Join(other, CAKeyFile), filepath.Join(dir, CAKeyFile))
			},
			wantErr: "key does not match",
		},
		"garbage certificate": {
			prepare: func(t *testing.T, dir string) { write(t, filepath.Join(dir, CACertFile), "nope") },
			wantErr: "no CERTIFICATE block",
		},
		"serving certificate as CA": {
			prepare: func(t *testing.T, dir string) {
				ca := mustCA(t, dir)
				if _, _, err := ca.EnsureServingCert(dir, nil); err != nil {
					t.Fatal(err)
				}
				copyFile(t, filepath.Join(dir, ServingCertFile), filepath.Join(dir, CACertFile))
				copyFile(t, filepath.Join(dir, ServingKeyFile), filepath.Join(dir, CAKeyFile))
			},
			wantErr: "not a CA",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			mustCA(t, dir)
			tc.prepare(t, dir)
			_, err := EnsureCA(dir)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestEnsureCAReplacesOrphanKey(t *testing.T) {
	dir := t.TempDir()
	mustCA(t, dir)
	remove(t, filepath.Join(dir, CACertFile))
	ca := mustCA(t, dir)
	if !bytes.Equal(ca.CertPEM(), readFile(t, filepath.Join(dir, CACertFile))) {
		t.Errorf("ca.crt not rewritten")
	}
	if _, err := EnsureCA(dir); err != nil {
		t.Errorf("reload after repair: %v", err)
	}
}

func TestServingCertTLSHandshake(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	certFile, keyFile, err := ca.EnsureServingCert(dir, []string{"api.example.test", "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	wantMode(t, keyFile, 0o600)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted handshake below
	srv.StartTLS()
	defer srv.Close()

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.CertPEM()) {
		t.Fatal("CA PEM not accepted")
	}
	// httptest listens on 127.0.0.1; the server names are checked by
	// overriding the name the client verifies.
	for _, serverName := range []string{"", "localhost", "api.example.test", "API.example.test"} {
		client := &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName},
		}}
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatalf("server name %q: %v", serverName, err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("server name %q: status %d", serverName, resp.StatusCode)
		}
		client.CloseIdleConnections()
	}

	untrusted := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "other.example.test"},
	}}
	if resp, err := untrusted.Get(srv.URL); err == nil {
		_ = resp.Body.Close()
		t.Errorf("handshake for a name not in the certificate succeeded")
	}
}

func TestServingCertSANs(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	certFile, _, err := ca.EnsureServingCert(dir, []string{" Node1.Example.test. ", "[fd00::1]", "10.0.0.1", "", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := parseCertPEM(readFile(t, certFile))
	if err != nil {
		t.Fatal(err)
	}
	got := sanSetOf(cert)
	want := sanSet{ips: []string{"10.0.0.1", "127.0.0.1", "::1", "fd00::1"}, dns: []string{"localhost", "node1.example.test"}}
	slices.Sort(want.ips)
	if !got.equal(want) {
		t.Errorf("SANs = %+v, want %+v", got, want)
	}
}

func TestServingCertInvalidHost(t *testing.T) {
	ca := mustCA(t, t.TempDir())
	for _, h := range []string{"host:6443", "bad_name", "a b"} {
		if _, _, err := ca.EnsureServingCert(t.TempDir(), []string{h}); err == nil || !strings.Contains(err.Error(), "invalid host") {
			t.Errorf("host %q: err = %v, want invalid host", h, err)
		}
	}
}

func TestLoadCA(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, dir)
	keyPEM := readFile(t, filepath.Join(dir, CAKeyFile))
	sec1DER, err := x509.MarshalECPrivateKey(ca.key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	sec1PEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1DER})
	cases := map[string]struct {
		key     []byte
		now     time.Time
		wantErr string
	}{
		"pkcs8 key":         {key: keyPEM, now: time.Now()},
		"sec1 key":          {key: sec1PEM, now: time.Now()},
		"expired":           {key: keyPEM, now: time.Now().Add(11 * 365 * 24 * time.Hour), wantErr: "CA expired"},
		"no key block":      {key: []byte("-----BEGIN FOO-----\n-----END FOO-----\n"), now: time.Now(), wantErr: "no private key block"},
		"corrupt key block": {key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")}), now: time.Now(), wantErr: "parse key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := loadCA(ca.CertPEM(), tc.key, tc.now)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}
