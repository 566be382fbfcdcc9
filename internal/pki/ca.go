package pki

import (
	"allot.dev/allot/internal/atomicfile"

	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// File names inside the PKI directory.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "apiserver.crt"
	ServingKeyFile  = "apiserver.key"
)

const (
	caValidity = 10 * 365 * 24 * time.Hour
	// clockSkew backdates NotBefore so that a peer whose clock is a little
	// behind accepts a fresh certificate.
	clockSkew = time.Hour
)

// CA is a loaded certificate authority. It is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// EnsureCA loads the CA in dir, creating dir (0700) and the CA if there is
// none.
func EnsureCA(dir string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	switch {
	case certErr == nil && keyErr == nil:
		ca, err := loadCA(certPEM, keyPEM, time.Now())
		if err != nil {
			return nil, fmt.Errorf("load CA from %s: %w", dir, err)
		}
		return ca, nil
	case errors.Is(certErr, fs.ErrNotExist) && (keyErr == nil || errors.Is(keyErr, fs.ErrNotExist)):
		return createCA(certPath, keyPath)
	case certErr == nil && errors.Is(keyErr, fs.ErrNotExist):
		return nil, fmt.Errorf("load CA: %s exists but %s is missing", certPath, keyPath)
	}
	return nil, fmt.Errorf("read CA: %w", errors.Join(certErr, keyErr))
}

func loadCA(certPEM, keyPEM []byte, now time.Time) (*CA, error) {
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, errors.New("certificate is not a CA")
	}
	if !publicKeyMatches(key, cert) {
		return nil, errors.New("key does not match certificate")
	}
	if now.After(cert.NotAfter) {
		return nil, fmt.Errorf("CA expired at %s", cert.NotAfter.Format(time.RFC3339))
	}
	return &CA{cert: cert, key: key, certPEM: certPEM}, nil
}

func createCA(certPath, keyPath string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("allot-ca@%d", now.Unix())},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	certPEM, err := writeKeyAndCert(certPath, keyPath, der, key)
	if err != nil {
		return nil, fmt.Errorf("write CA: %w", err)
	}
	return &CA{cert: cert, key: key, certPEM: certPEM}, nil
}

// CertPEM returns the CA certificate in PEM, for clients to trust. The
// caller owns the returned slice.
func (ca *CA) CertPEM() []byte {
	return append([]byte(nil), ca.certPEM...)
}

// writeKeyAndCert writes the key (0600) before the certificate (0644), so an
// interrupted write leaves a key without a certificate, which both Ensure
// functions repair, and never a certificate with a foreign key. It returns
// the certificate's PEM.
func writeKeyAndCert(certPath, keyPath string, certDER []byte, key crypto.Signer) ([]byte, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	if err := atomicfile.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Base(keyPath), err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})
	if err := atomicfile.WriteFile(certPath, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Base(certPath), err)
	}
	return certPEM, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial: %w", err)
	}
	return serial, nil
}

// parseCertPEM parses the first CERTIFICATE block.
func parseCertPEM(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("parse certificate: no CERTIFICATE block")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		return cert, nil
	}
}

// parseKeyPEM parses the first private key block: PKCS #8, SEC 1 (EC) or
// PKCS #1 (RSA).
func parseKeyPEM(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("parse key: no private key block")
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse key: %w", err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("parse key: %T cannot sign", key)
		}
		return signer, nil
	}
}

func publicKeyMatches(key crypto.Signer, cert *x509.Certificate) bool {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(cert.PublicKey)
}
