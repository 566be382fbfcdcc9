// Package pki keeps the cluster's certificate authority and the API
// server's serving certificate in a directory:
//
//	ca.crt          CA certificate, PEM, mode 0644: what clients trust
//	ca.key          CA private key, PEM (PKCS #8), mode 0600
//	apiserver.crt   serving certificate signed by the CA, PEM, mode 0644
//	apiserver.key   serving private key, PEM (PKCS #8), mode 0600
//	apiserver-node-client.{crt,key}  the API server's client certificate
//	                towards node agents (NodeClientName)
//	nodes/NAME.crt  the serving certificate last issued to node NAME (kept
//	                by the API server: the addresses it may dial)
//
// [EnsureCA] creates an ECDSA P-256 CA valid for ten years when ca.crt is
// missing and loads it otherwise. It never replaces an existing CA
// certificate, since every client trusts it: a CA certificate without its
// key, a key that does not match, or an expired CA is an error for the
// operator to resolve. A key without a certificate is taken for an
// interrupted creation and replaced. A CA brought by the operator may use an
// RSA, ECDSA or Ed25519 key.
//
// [CA.EnsureServingCert] issues a one-year ECDSA P-256 serving certificate
// for the given hosts plus 127.0.0.1, ::1 and localhost, and reissues it when
// the set of names changed, when it expires within 30 days, when it no
// longer verifies against the CA, or when the files are missing, unreadable
// as PEM or do not match each other. Renewal happens only when it is called,
// so a server calls it at every start.
//
// [CA.IssueNodeServingCert] signs a node agent's serving certificate from
// its certificate request for exactly the addresses the API server says
// the node proved (node.go; docs/decisions.md, "Node endpoints over TLS").
//
// Every file is written atomically (temporary file, fsync, rename, directory
// fsync), so a crash leaves the old file or the new one. Nothing here locks
// the directory: one process at a time (the API server or `allot up`) must
// own it.
package pki
