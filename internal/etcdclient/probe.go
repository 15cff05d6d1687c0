package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"time"
)

// probeTLS dials ep (https://host:port) with t and returns the handshake
// error, if any. A client certificate the server refuses shows only after
// the handshake (TLS 1.3), as an alert on the first read, so it reads
// once, briefly. A connection that cannot be made at all is not a TLS
// error: probeTLS returns nil and the caller reports the endpoint as
// unreachable.
func probeTLS(ctx context.Context, ep string, t *tls.Config, wait time.Duration) error {
	host := strings.TrimPrefix(ep, "https://")
	cfg := t.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(host)
	}
	cfg.NextProtos = []string{"h2"}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		return nil
	}
	conn := tls.Client(raw, cfg)
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	if err := conn.HandshakeContext(ctx); err != nil {
		if isTimeout(err) {
			return nil
		}
		return err
	}
	if _, err := conn.Read(make([]byte, 1)); remoteAlert(err) != "" {
		return err
	}
	return nil
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)
}

// tlsHint says which setting to check for a handshake error.
func tlsHint(err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		record   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return " (check --cacert)"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return " (the server's certificate is outside its validity period)"
	case errors.As(err, &hostname):
		return " (the endpoint's host is not in the server certificate: fix --endpoints or set --server-name)"
	case errors.As(err, &record):
		return " (the server does not speak TLS: use http://)"
	case remoteAlert(err) == "tls: certificate required":
		return " (the server requires a client certificate: set --cert and --key)"
	case remoteAlert(err) != "":
		return " (the server refused the client certificate: check --cert, --key and its expiry)"
	}
	return ""
}

// remoteAlert is the text of a TLS alert the server sent ("tls: expired
// certificate"), or "". crypto/tls reports it as a net.OpError whose Op is
// "remote error"; the alert type itself is unexported.
func remoteAlert(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		return op.Err.Error()
	}
	return ""
}
