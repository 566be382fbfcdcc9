package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	servingValidity = 365 * 24 * time.Hour
	// renewBefore is how long before expiry a serving certificate is
	// reissued.
	renewBefore = 30 * 24 * time.Hour
)

// defaultHosts are in every serving certificate, so local clients always
// verify.
var defaultHosts = []string{"127.0.0.1", "::1", "localhost"}

// EnsureServingCert makes sure dir holds a serving certificate and key for
// hosts (IP addresses and DNS names, wildcards allowed) signed by ca, and
// returns their paths. See the package doc for when it reissues them.
func (ca *CA) EnsureServingCert(dir string, hosts []string) (certFile, keyFile string, err error) {
	want, err := newSANSet(append(slices.Clone(hosts), defaultHosts...))
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("create pki dir: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, ServingCertFile), filepath.Join(dir, ServingKeyFile)
	now := time.Now()
	ok, err := ca.servingCertValid(certFile, keyFile, want, now)
	if err != nil {
		return "", "", err
	}
	if !ok {
		if err := ca.issueServingCert(certFile, keyFile, want, now, now.Add(servingValidity)); err != nil {
			return "", "", err
		}
	}
	return certFile, keyFile, nil
}

// servingCertValid reports whether the files hold a matching pair, signed by
// ca, for exactly the names in want, valid past now+renewBefore. Missing or
// malformed files are not valid; only errors reading existing files are
// returned.
func (ca *CA) servingCertValid(certFile, keyFile string, want sanSet, now time.Time) (bool, error) {
	certPEM, err := os.ReadFile(certFile)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read serving certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read serving key: %w", err)
	}
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return false, nil
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil || !publicKeyMatches(key, cert) {
		return false, nil
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := cert.Verify(opts); err != nil {
		return false, nil
	}
	if now.Add(renewBefore).After(cert.NotAfter) {
		return false, nil
	}
	return sanSetOf(cert).equal(want), nil
}

// issueServingCert writes a new key and a certificate for s valid from
// notBefore-clockSkew to notAfter, or to the CA's expiry if earlier.
func (ca *CA) issueServingCert(certFile, keyFile string, s sanSet, notBefore, notAfter time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate serving key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "allot-apiserver"},
		NotBefore:             notBefore.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              s.dns,
	}
	for _, ip := range s.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return fmt.Errorf("create serving certificate: %w", err)
	}
	if _, err := writeKeyAndCert(certFile, keyFile, der, key); err != nil {
		return fmt.Errorf("write serving certificate: %w", err)
	}
	return nil
}

// sanSet is a canonical, sorted set of subject alternative names.
type sanSet struct {
	ips []string // net.IP.String() form
	dns []string // lower case, no trailing dot
}

// newSANSet canonicalises hosts: IPs (optionally in brackets) and DNS names
// (case and a trailing dot ignored; "*." wildcards allowed). Empty entries
// are skipped.
func newSANSet(hosts []string) (sanSet, error) {
	var s sanSet
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); ip != nil {
			s.ips = append(s.ips, ip.String())
			continue
		}
		name := strings.ToLower(strings.TrimSuffix(h, "."))
		if validation.IsDNS1123Subdomain(name) != nil && validation.IsWildcardDNS1123Subdomain(name) != nil {
			return sanSet{}, fmt.Errorf("invalid host %q: not an IP address or DNS name", h)
		}
		s.dns = append(s.dns, name)
	}
	s.sort()
	return s, nil
}

func sanSetOf(cert *x509.Certificate) sanSet {
	var s sanSet
	for _, ip := range cert.IPAddresses {
		s.ips = append(s.ips, ip.String())
	}
	for _, name := range cert.DNSNames {
		s.dns = append(s.dns, strings.ToLower(name))
	}
	s.sort()
	return s
}

func (s *sanSet) sort() {
	slices.Sort(s.ips)
	s.ips = slices.Compact(s.ips)
	slices.Sort(s.dns)
	s.dns = slices.Compact(s.dns)
}

func (s sanSet) equal(o sanSet) bool {
	return slices.Equal(s.ips, o.ips) && slices.Equal(s.dns, o.dns)
}
