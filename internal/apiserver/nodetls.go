package apiserver

import (
	"context"
	"crypto/tls"
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
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/apiserver/auth"
	"allot.dev/allot/internal/atomicfile"
	"allot.dev/allot/internal/pki"
	"allot.dev/allot/internal/storage"
)

// NodeTLS is how the API server reaches node agents: over TLS, to the
// addresses of the serving certificate it issued to each node, with a
// client certificate of its own.
type NodeTLS struct {
	// CA issues node serving certificates and verifies them.
	CA *pki.CA
	// CertDir keeps the certificate last issued to each node, NAME.crt:
	// the addresses the API server connects to.
	CertDir string
	// ClientCert is presented to node agents (pki.NodeClientName).
	ClientCert tls.Certificate
	// HostIPs are the addresses of the API server's host, granted to a
	// node whose request came over loopback (it runs on this host).
	HostIPs []net.IP
}

// maxCSRBytes bounds a certificate request's body.
const maxCSRBytes = 16 << 10

// serveNodeCertificate issues a node's serving certificate for the
// addresses the request proves: the peer address of its connection, and
// the host's own addresses and loopback when that peer is loopback. Only
// the node itself (or an admin) may ask.
func (s *Server) serveNodeCertificate(w http.ResponseWriter, r *http.Request) {
	node := r.PathValue("node")
	nt := s.cfg.NodeTLS
	if nt == nil || nt.CA == nil {
		writeError(w, apierrors.NewServiceUnavailable("this API server issues no node certificates (it has no cluster CA)"))
		return
	}
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("node name %q: %s", node, strings.Join(errs, "; "))))
		return
	}
	u := userFrom(r.Context())
	if !(u.Role == auth.RoleAdmin || (u.Role == auth.RoleNode && u.Name == node)) {
		writeError(w, apierrors.NewForbidden(corev1.Resource("nodes/servingcertificate"), node,
			fmt.Errorf("%s may not obtain node %s's serving certificate: only that node's own credential may", u.Name, node)))
		return
	}
	ips, err := provenAddresses(r.RemoteAddr, nt.HostIPs)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCSRBytes+1))
	if err != nil || len(body) > maxCSRBytes {
		writeError(w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("a certificate request is at most %d bytes", maxCSRBytes)))
		return
	}
	certPEM, err := nt.CA.IssueNodeServingCert(body, node, ips, time.Now())
	if err != nil {
		writeError(w, apierrors.NewBadRequest("body: "+err.Error()))
		return
	}
	// In etcd first, where every API server of the cluster finds it;
	// then in this server's CertDir, a copy that servers from before the
	// certificates were shared still read.
	if err := s.storeNodeCert(r.Context(), node, certPEM); err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	if err := os.MkdirAll(nt.CertDir, 0o700); err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	if err := atomicfile.WriteFile(filepath.Join(nt.CertDir, node+".crt"), certPEM, 0o644); err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	s.log.Info("issued node serving certificate", "node", node, "user", u.Name, "addresses", ips)
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(certPEM)
}

// provenAddresses are the addresses a request from remoteAddr proves its
// sender has: that peer address; from loopback, the loopback addresses
// and the host's own.
func provenAddresses(remoteAddr string, hostIPs []net.IP) ([]net.IP, error) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return nil, fmt.Errorf("peer address %q: %v", remoteAddr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("peer address %q is not an IP address", remoteAddr)
	}
	ips := []net.IP{ip}
	if ip.IsLoopback() {
		ips = append(ips, net.ParseIP("127.0.0.1"), net.IPv6loopback)
		ips = append(ips, hostIPs...)
	}
	var out []net.IP
	for _, a := range ips {
		if !slices.ContainsFunc(out, a.Equal) {
			out = append(out, a)
		}
	}
	return out, nil
}

// nodeEndpoint is the address (IP:port) and TLS configuration to reach
// node's agent: an IP of the serving certificate the API server issued to
// it (the Node's InternalIP when the certificate has it, else the address
// its request came from), verified on connect to be that certificate's
// node. An address only written into the Node's status is never used.
func (s *Server) nodeEndpoint(ctx context.Context, node *corev1.Node) (string, *tls.Config, error) {
	nt := s.cfg.NodeTLS
	if nt == nil || nt.CA == nil {
		return "", nil, apierrors.NewServiceUnavailable("this API server has no cluster CA to reach node agents over TLS")
	}
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 || port > 65535 {
		return "", nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s does not publish a log endpoint (status.daemonEndpoints.kubeletEndpoint.port)", node.Name))
	}
	data, err := s.loadNodeCert(ctx, node.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s has no serving certificate from this cluster: its agent requests one when it starts", node.Name))
	}
	if err != nil {
		return "", nil, apierrors.NewInternalError(err)
	}
	cert, err := pki.ParseCertPEM(data)
	if err != nil {
		return "", nil, apierrors.NewInternalError(fmt.Errorf("node %s's serving certificate: %w", node.Name, err))
	}
	pool := nt.CA.Pool()
	if err := pki.VerifyNodeServingCert(cert, pool, node.Name, time.Now()); err != nil {
		return "", nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s's serving certificate: %v; its agent requests a new one when it starts", node.Name, err))
	}
	if len(cert.IPAddresses) == 0 {
		return "", nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s's serving certificate has no address", node.Name))
	}
	ip := cert.IPAddresses[0]
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if want := net.ParseIP(a.Address); want != nil && slices.ContainsFunc(cert.IPAddresses, want.Equal) {
			ip = want
			break
		}
	}
	name := node.Name
	cfg := &tls.Config{
		RootCAs:      pool,
		ServerName:   ip.String(), // verified against the certificate's IP addresses
		Certificates: []tls.Certificate{nt.ClientCert},
		MinVersion:   tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("node presented no certificate")
			}
			return pki.VerifyNodeServingCert(cs.PeerCertificates[0], pool, name, time.Now())
		},
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(port)), cfg, nil
}

// nodeCertKey is where the certificate issued to node is kept in etcd,
// shared by every API server of the cluster (no API serves the key).
func nodeCertKey(node string) string { return "/registry/allot.dev/nodeservingcerts/" + node }

// storeNodeCert keeps the certificate issued to node in etcd, replacing
// the one before.
func (s *Server) storeNodeCert(ctx context.Context, node string, certPEM []byte) error {
	key := nodeCertKey(node)
	for range 5 {
		_, err := s.store.Create(ctx, key, certPEM)
		if !errors.Is(err, storage.ErrExists) {
			return err
		}
		_, err = s.store.Update(ctx, key, certPEM, 0)
		if !errors.Is(err, storage.ErrNotFound) { // deleted in between: create again
			return err
		}
	}
	return fmt.Errorf("store node %s's serving certificate: the key kept changing", node)
}

// loadNodeCert returns the certificate last issued to node by any API
// server of the cluster (etcd), else the one this server issued before
// certificates were shared (its CertDir), else fs.ErrNotExist.
func (s *Server) loadNodeCert(ctx context.Context, node string) ([]byte, error) {
	kv, err := s.store.Get(ctx, nodeCertKey(node))
	switch {
	case err == nil:
		return kv.Value, nil
	case !errors.Is(err, storage.ErrNotFound):
		return nil, err
	}
	return os.ReadFile(filepath.Join(s.cfg.NodeTLS.CertDir, node+".crt"))
}

// nodeTransport is a one-request transport to a node agent.
func nodeTransport(cfg *tls.Config) *http.Transport {
	return &http.Transport{
		TLSClientConfig:     cfg,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableKeepAlives:   true,
		ForceAttemptHTTP2:   false,
	}
}
