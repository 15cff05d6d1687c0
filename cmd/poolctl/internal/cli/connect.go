package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/connectivity"

	"github.com/etcdpool/etcdpool/coordinator"
)

// connect builds the etcd client from the global flags, waits up to
// --dial-timeout for a connection, and wraps it in a Coordinator. The
// returned func closes both.
func (g *globalOptions) connect(ctx context.Context) (*coordinator.Coordinator, func(), error) {
	cfg, err := g.clientConfig()
	if err != nil {
		return nil, nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		if unreachable(err) {
			return nil, nil, g.unreachableErr(err)
		}
		return nil, nil, fmt.Errorf("connect to etcd: %w", err)
	}
	if err := g.waitReady(ctx, cli); err != nil {
		cli.Close()
		return nil, nil, err
	}
	c, err := coordinator.New(cli, coordinator.WithPrefix(g.Prefix))
	if err != nil {
		cli.Close()
		return nil, nil, fmt.Errorf("--prefix: %w", err)
	}
	return c, func() { c.Close(); cli.Close() }, nil
}

func (g *globalOptions) clientConfig() (clientv3.Config, error) {
	cfg := clientv3.Config{
		Endpoints:   g.Endpoints,
		DialTimeout: g.DialTimeout,
		Logger:      zap.NewNop(),
	}
	if g.tls() {
		t, err := g.tlsConfig()
		if err != nil {
			return cfg, err
		}
		cfg.TLS = t
	}
	if g.User != "" {
		user, pass, err := g.credentials()
		if err != nil {
			return cfg, err
		}
		cfg.Username, cfg.Password = user, pass
	}
	return cfg, nil
}

// credentials splits --user, taking the password from ETCDPOOL_PASSWORD
// or a prompt when --user names the user alone.
func (g *globalOptions) credentials() (user, pass string, err error) {
	user, pass, ok := strings.Cut(g.User, ":")
	if user == "" {
		return "", "", usageError("--user %q: want user:password or user", g.User)
	}
	if ok {
		return user, pass, nil
	}
	if pass = g.env.Getenv("ETCDPOOL_PASSWORD"); pass != "" {
		return user, pass, nil
	}
	pass, err = g.env.ReadPassword(fmt.Sprintf("Password for %s: ", user))
	if err != nil {
		return "", "", usageError("--user %s has no password: set ETCDPOOL_PASSWORD or run in a terminal (%v)", user, err)
	}
	return user, pass, nil
}

func (g *globalOptions) tlsConfig() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.CACert != "" {
		pem, err := os.ReadFile(g.CACert)
		if err != nil {
			return nil, usageError("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageError("--cacert %s: no PEM certificate found", g.CACert)
		}
		t.RootCAs = pool
	}
	if g.Cert != "" {
		pair, err := tls.LoadX509KeyPair(g.Cert, g.Key)
		if err != nil {
			return nil, usageError("--cert/--key: %w", err)
		}
		t.Certificates = []tls.Certificate{pair}
	}
	return t, nil
}

// waitReady waits up to --dial-timeout for a usable connection, so that an
// unreachable etcd fails fast and clearly instead of at the first request's
// deadline.
func (g *globalOptions) waitReady(ctx context.Context, cli *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, g.DialTimeout)
	defer cancel()
	conn := cli.ActiveConnection()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			if errors.Is(ctx.Err(), context.Canceled) {
				return context.Cause(ctx)
			}
			return g.unreachableErr(fmt.Errorf("no connection within --dial-timeout %v", g.DialTimeout))
		}
	}
	return nil
}

func (g *globalOptions) unreachableErr(err error) error {
	return classify(errUnreachable, fmt.Errorf("etcd unreachable at %s: %v (check --endpoints or ETCDPOOL_ENDPOINTS)", strings.Join(g.Endpoints, ","), err))
}
