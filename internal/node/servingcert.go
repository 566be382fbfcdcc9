package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/atomicfile"
	"allot.dev/allot/internal/pki"
)

// Files of the agent's serving certificate under ROOT/pki.
const (
	servingCertFile = "serving.crt"
	servingKeyFile  = "serving.key"
)

// servingCert is the log server's certificate, issued by the cluster CA
// through the API server (pki.NodeCertificatePath) and kept in ROOT/pki
// so that it survives restarts.
type servingCert struct {
	dir   string
	node  string
	rc    *rest.Config
	roots *x509.CertPool
	cur   atomic.Pointer[tls.Certificate]
}

// newServingCert reads the cluster CA from the client's configuration.
func newServingCert(rootDir, node string, rc *rest.Config) (*servingCert, error) {
	caPEM := rc.TLSClientConfig.CAData
	if len(caPEM) == 0 && rc.TLSClientConfig.CAFile != "" {
		data, err := os.ReadFile(rc.TLSClientConfig.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the cluster CA: %w", err)
		}
		caPEM = data
	}
	roots := x509.NewCertPool()
	if len(caPEM) == 0 || !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("the log server needs the cluster CA (certificate-authority-data in the kubeconfig) to get a serving certificate and to verify the API server")
	}
	return &servingCert{dir: filepath.Join(rootDir, "pki"), node: node, rc: rc, roots: roots}, nil
}

// ensure loads the kept certificate, or requests a new one when there is
// none, it does not verify against the cluster CA or names another node,
// it ends within pki.NodeRenewBefore, or it lacks an address in want (the
// node's InternalIP: the node's addresses changed).
func (s *servingCert) ensure(ctx context.Context, want []net.IP) error {
	why, _ := s.load(want, time.Now())
	if why == "" {
		return nil
	}
	if err := s.request(ctx); err != nil {
		return fmt.Errorf("get a serving certificate (%s): %w", why, err)
	}
	// A new certificate that is usable but not as wanted (the API server
	// saw the request come from another address, through NAT or a proxy:
	// it holds the addresses that request proved) is used all the same.
	if still, usable := s.load(want, time.Now()); !usable {
		return fmt.Errorf("the new serving certificate: %s", still)
	}
	return nil
}

// load reads the kept certificate and says why it needs a new one (""
// when it does not); usable means it verifies for this node and is now in
// cur.
func (s *servingCert) load(want []net.IP, now time.Time) (why string, usable bool) {
	c, err := tls.LoadX509KeyPair(filepath.Join(s.dir, servingCertFile), filepath.Join(s.dir, servingKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "none kept yet", false
	}
	if err != nil || c.Leaf == nil {
		return fmt.Sprintf("the kept one is unreadable: %v", err), false
	}
	if err := pki.VerifyNodeServingCert(c.Leaf, s.roots, s.node, now); err != nil {
		return "the kept one: " + err.Error(), false
	}
	s.cur.Store(&c)
	if now.Add(pki.NodeRenewBefore).After(c.Leaf.NotAfter) {
		return "the kept one ends at " + c.Leaf.NotAfter.Format(time.RFC3339), true
	}
	for _, ip := range want {
		if !slices.ContainsFunc(c.Leaf.IPAddresses, ip.Equal) {
			return fmt.Sprintf("the kept one lacks the node's address %s", ip), true
		}
	}
	return "", true
}

// request makes a new key, has the API server issue a certificate for it
// and keeps both (key first: a crash leaves an old certificate that does
// not match the key, which the next start replaces).
func (s *servingCert) request(ctx context.Context) error {
	keyPEM, csrPEM, err := pki.NewNodeKeyCSR(s.node)
	if err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(s.rc)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	url := strings.TrimRight(s.rc.Host, "/") + pki.NodeCertificatePath(s.node)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(csrPEM))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/pkcs10")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", pki.NodeCertificatePath(s.node), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("read the certificate: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST %s: %s: %s", pki.NodeCertificatePath(s.node), resp.Status, strings.TrimSpace(string(body)))
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", s.dir, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.dir, servingKeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(s.dir, servingCertFile), body, 0o644)
}

// tlsConfig serves the current certificate and verifies client
// certificates against the cluster CA when one is given (the API server's;
// token holders come without one).
func (s *servingCert) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := s.cur.Load(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate")
		},
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  s.roots,
	}
}
