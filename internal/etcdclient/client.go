package etcdclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
)

// MaxReconnectDelay caps the client's reconnect backoff, so that a
// process notices within seconds that etcd is back after an outage.
// gRPC's own cap is two minutes.
const MaxReconnectDelay = 2 * time.Second

// keepAliveTime is the interval of gRPC keepalive pings.
const keepAliveTime = 5 * time.Second

// ClientConfig validates c and builds the clientv3 configuration: the
// normalized endpoints, TLS from transport.TLSInfo (as etcdctl builds
// it), credentials, keepalive pings, a reconnect backoff capped at
// MaxReconnectDelay, and a silent zap logger. It is the only place either
// binary builds one.
func (c Config) ClientConfig() (clientv3.Config, error) {
	if err := c.Validate(); err != nil {
		return clientv3.Config{}, err
	}
	eps, _ := c.endpoints()
	cfg := clientv3.Config{
		Endpoints:            eps,
		DialTimeout:          c.DialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: c.DialTimeout,
		Username:             c.Username,
		Password:             c.Password,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: MaxReconnectDelay},
			MinConnectTimeout: c.DialTimeout,
		})},
	}
	if c.TLS() {
		t, err := c.tlsConfig()
		if err != nil {
			return clientv3.Config{}, err
		}
		cfg.TLS = t
	}
	return cfg, nil
}

// tlsConfig loads the TLS material. The files are read once, here.
func (c Config) tlsConfig() (*tls.Config, error) {
	info := transport.TLSInfo{CertFile: c.CertFile, KeyFile: c.KeyFile, TrustedCAFile: c.CAFile, ServerName: c.ServerName}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if err := checkPEM(c.CAFile); err != nil {
		return nil, &FieldError{"cacert", err.Error()}
	}
	if !info.Empty() || info.TrustedCAFile != "" {
		var err error
		if t, err = info.ClientConfig(); err != nil {
			return nil, &FieldError{tlsField(c), fmt.Sprintf("cannot load TLS files: %v", err)}
		}
	}
	// With no files: TLS with the system roots (an https:// endpoint, or
	// --server-name alone).
	if c.ServerName != "" {
		pinServerName(t, c.ServerName)
	}
	return t, nil
}

func tlsField(c Config) string {
	if c.CertFile != "" {
		return "cert"
	}
	return "cacert"
}

// New validates c and returns a client. It does not wait for a
// connection (see Dial), except to log in when c has a user: a login that
// does not finish within DialTimeout is a DialError.
func New(c Config) (*clientv3.Client, error) {
	cfg, err := c.ClientConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	switch {
	case err == nil:
		return cli, nil
	case errors.Is(err, context.DeadlineExceeded):
		// With a user, clientv3.New logs in, within DialTimeout.
		return nil, &DialError{Endpoints: joinEndpoints(c.Endpoints),
			Err: fmt.Errorf("no connection and login within --dial-timeout %v: %w", c.DialTimeout, err)}
	}
	return nil, fmt.Errorf("etcdclient: client for %s: %w", joinEndpoints(c.Endpoints), err)
}

// checkPEM checks that a CA bundle holds a certificate: transport.TLSInfo
// accepts a file without one and every handshake then fails.
func checkPEM(path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return fmt.Errorf("%s: no PEM certificate found", path)
	}
	return nil
}
