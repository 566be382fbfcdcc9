package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Node agents' TLS: each agent serves its log endpoint with a certificate
// the CA issues for its node name and for the addresses the API server saw
// it come from; the API server connects with a client certificate of its
// own. See docs/decisions.md ("Node endpoints over TLS").
const (
	// NodeClientCertFile and NodeClientKeyFile are the API server's
	// client certificate towards node agents, in the PKI directory.
	NodeClientCertFile = "apiserver-node-client.crt"
	NodeClientKeyFile  = "apiserver-node-client.key"
	// NodeClientName is the common name of that client certificate: what
	// node agents accept for their API-server-only endpoints.
	NodeClientName = "allot:apiserver"
	// NodeServingValidity is how long a node serving certificate is valid;
	// agents request a new one within NodeRenewBefore of its end.
	NodeServingValidity = 90 * 24 * time.Hour
	NodeRenewBefore     = 30 * 24 * time.Hour
)

// NodeCertificatePath is where a node agent requests its serving
// certificate from the API server: POST a PEM certificate request, get
// the PEM certificate (201).
func NodeCertificatePath(node string) string {
	return "/allot/v1/nodes/" + node + "/servingcertificate"
}

// NodeServingName is the common name of node's serving certificate.
func NodeServingName(node string) string { return "system:node:" + node }

// Certificate returns the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Pool returns a pool holding only the CA certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// IssueNodeServingCert signs a serving certificate for the node's public
// key (from csrPEM, whose signature proves the key is held) with common
// name NodeServingName(node) and exactly the given IP addresses, whatever
// the request asked for. It returns the certificate in PEM.
func (ca *CA) IssueNodeServingCert(csrPEM []byte, node string, ips []net.IP, now time.Time) ([]byte, error) {
	block, _ := pem.Decode(csrPEM)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("no CERTIFICATE REQUEST block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	if len(ips) == 0 {
		return nil, errors.New("no address to issue the certificate for")
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: NodeServingName(node)},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(NodeServingValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign node serving certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// VerifyNodeServingCert checks that cert chains to roots as a serving
// certificate at now and names node.
func VerifyNodeServingCert(cert *x509.Certificate, roots *x509.CertPool, node string, now time.Time) error {
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("not a serving certificate of the cluster CA: %w", err)
	}
	if want := NodeServingName(node); cert.Subject.CommonName != want {
		return fmt.Errorf("certificate is for %q, not %q", cert.Subject.CommonName, want)
	}
	return nil
}

// ParseCertPEM parses the first certificate in PEM data.
func ParseCertPEM(data []byte) (*x509.Certificate, error) { return parseCertPEM(data) }

// EnsureNodeClientCert makes sure dir holds the API server's client
// certificate towards node agents (common name NodeClientName, one year,
// reissued within 30 days of its end or when it no longer verifies against
// the CA) and returns it loaded.
func (ca *CA) EnsureNodeClientCert(dir string) (tls.Certificate, error) {
	certFile, keyFile := filepath.Join(dir, NodeClientCertFile), filepath.Join(dir, NodeClientKeyFile)
	now := time.Now()
	// Missing, unreadable or mismatched files are replaced.
	if c, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil && c.Leaf != nil {
		_, verr := c.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: now.Add(renewBefore),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if verr == nil && c.Leaf.Subject.CommonName == NodeClientName {
			return c, nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate node client key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: NodeClientName},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(servingValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("sign node client certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("create pki dir: %w", err)
	}
	if _, err := writeKeyAndCert(certFile, keyFile, der, key); err != nil {
		return tls.Certificate{}, fmt.Errorf("write node client certificate: %w", err)
	}
	return tls.LoadX509KeyPair(certFile, keyFile)
}

// IsNodeClient reports whether verified chains (from a TLS handshake that
// verified the client against the CA) name the API server's node client.
func IsNodeClient(chains [][]*x509.Certificate) bool {
	return slices.ContainsFunc(chains, func(c []*x509.Certificate) bool {
		return len(c) > 0 && c[0].Subject.CommonName == NodeClientName &&
			slices.Contains(c[0].ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	})
}

// NewNodeKeyCSR makes an ECDSA P-256 key and a certificate request for
// node signed with it, both in PEM.
func NewNodeKeyCSR(node string) (keyPEM, csrPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: NodeServingName(node)},
	}, crypto.Signer(key))
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate request: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}
