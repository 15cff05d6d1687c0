package cli

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// connect builds the etcd client from the global flags through
// etcdclient, the connection path poolagent shares, waits up to
// --dial-timeout for a connection, and wraps it in a Coordinator with
// opts. The returned func closes both.
func (g *globalOptions) connect(ctx context.Context, opts ...coordinator.Option) (*coordinator.Coordinator, func(), error) {
	ec, err := g.etcdConfig()
	if err != nil {
		return nil, nil, err
	}
	cli, err := etcdclient.Dial(ctx, ec)
	if err != nil {
		return nil, nil, g.dialErr(err)
	}
	c, err := coordinator.New(cli, append([]coordinator.Option{coordinator.WithPrefix(g.Prefix)}, opts...)...)
	if err != nil {
		cli.Close()
		return nil, nil, fmt.Errorf("--prefix: %w", err)
	}
	return c, func() { c.Close(); cli.Close() }, nil
}

// client is connect without the Coordinator, for commands that talk to
// etcd's own APIs (roles, doctor).
func (g *globalOptions) client(ctx context.Context) (*clientv3.Client, error) {
	ec, err := g.etcdConfig()
	if err != nil {
		return nil, err
	}
	cli, err := etcdclient.Dial(ctx, ec)
	if err != nil {
		return nil, g.dialErr(err)
	}
	return cli, nil
}

// dialErr classifies a failed dial: an invalid setting is bad usage, no
// connection (a TLS cause included) is "unreachable", and a caller's
// deadline passes through with its own cause.
func (g *globalOptions) dialErr(err error) error {
	switch {
	case errors.Is(err, etcdclient.ErrInvalid):
		return g.fieldErr(err)
	case errors.Is(err, etcdclient.ErrUnreachable), errors.Is(err, etcdclient.ErrTLS):
		return classify(errUnreachable, err)
	}
	return err
}

// etcdConfig is the one etcdclient.Config of this invocation. The password
// comes from --user user:password, --password-file, $ETCDPOOL_PASSWORD_FILE
// or $ETCDPOOL_PASSWORD, else a no-echo prompt.
func (g *globalOptions) etcdConfig() (etcdclient.Config, error) {
	ec := etcdclient.Config{
		Endpoints: g.Endpoints, DialTimeout: g.DialTimeout,
		CAFile: g.CACert, CertFile: g.Cert, KeyFile: g.Key, ServerName: g.ServerName,
	}
	user, pass, err := etcdclient.Credentials(g.User, g.PasswordFile, g.env.Getenv)
	if err != nil {
		return ec, g.fieldErr(err)
	}
	if user != "" && pass == "" {
		pass, err = g.env.ReadPassword(fmt.Sprintf("Password for %s: ", user))
		if err != nil {
			return ec, usageError("--user %s has no password: use --password-file, set %s or %s, or run in a terminal (%v)",
				user, etcdclient.EnvPasswordFile, etcdclient.EnvPassword, err)
		}
	}
	ec.Username, ec.Password = user, pass
	return ec, nil
}

// needsPrompt reports whether connecting would prompt for a password.
func (g *globalOptions) needsPrompt() bool {
	user, pass, err := etcdclient.Credentials(g.User, g.PasswordFile, g.env.Getenv)
	return err == nil && user != "" && pass == ""
}
