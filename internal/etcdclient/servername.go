package etcdclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// pinServerName makes t verify the server certificate against name
// whatever name the dialer puts in t.ServerName. etcd's client sets the
// handshake's server name from each endpoint's host, so tls.Config's
// ServerName alone has no effect; this is the verification crypto/tls
// would do, with the name fixed.
func pinServerName(t *tls.Config, name string) {
	roots := t.RootCAs
	t.ServerName = name
	t.InsecureSkipVerify = true // replaced by VerifyConnection below
	t.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: server sent no certificate")
		}
		opts := x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
		}
		return nil
	}
}
