package agent

import (
	"crypto/tls"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/etcdpool/etcdpool/config"
)

// MaxReconnectDelay caps the client's reconnect backoff, so that an agent
// notices within seconds that etcd is back after an outage. gRPC's own cap
// is two minutes.
const MaxReconnectDelay = 2 * time.Second

// NewClient returns an etcd client for cfg. It does not wait for a
// connection: requests fail or block until etcd is reachable. The client's
// zap logger is silenced; callers log through slog.
func NewClient(cfg config.Etcd) (*clientv3.Client, error) {
	tlsCfg, err := tlsConfig(cfg)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout.D(),
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: cfg.DialTimeout.D(),
		Username:             cfg.Username,
		Password:             cfg.Password,
		TLS:                  tlsCfg,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: MaxReconnectDelay},
			MinConnectTimeout: cfg.DialTimeout.D(),
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("agent: etcd client for %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return cli, nil
}

func tlsConfig(cfg config.Etcd) (*tls.Config, error) {
	https := false
	for _, ep := range cfg.Endpoints {
		https = https || strings.HasPrefix(ep, "https://")
	}
	if !cfg.TLS.Enabled() && !https {
		return nil, nil
	}
	info := transport.TLSInfo{
		CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile,
		TrustedCAFile: cfg.TLS.CAFile, ServerName: cfg.TLS.ServerName,
	}
	c, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("agent: etcd TLS: %w", err)
	}
	return c, nil
}
