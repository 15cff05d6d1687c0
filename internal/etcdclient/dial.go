package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"
)

// errDialTimeout is the cause of WaitReady's own deadline, so that a
// caller's shorter deadline is never blamed on the dial timeout.
var errDialTimeout = errors.New("dial timeout")

// Dial returns a client for c once it has a usable connection, waiting
// at most c.DialTimeout (and no longer than ctx allows). See WaitReady for
// its errors.
func Dial(ctx context.Context, c Config) (*clientv3.Client, error) {
	cli, err := New(c)
	if err != nil {
		return nil, err
	}
	if err := WaitReady(ctx, cli, c); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}

// WaitReady waits up to c.DialTimeout for cli to connect. When it does
// not, the error wraps ErrUnreachable, or ErrTLS with the handshake's
// cause in one line (an unknown CA, an expired or mismatched certificate,
// a client certificate the server refuses). When ctx ends first, it
// returns ctx's cause, so the caller's deadline is named, not the dial
// timeout.
func WaitReady(ctx context.Context, cli *clientv3.Client, c Config) error {
	dctx, cancel := context.WithTimeoutCause(ctx, c.DialTimeout, errDialTimeout)
	defer cancel()
	conn := cli.ActiveConnection()
	conn.Connect()
	diagnosed := false
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if st == connectivity.TransientFailure && !diagnosed {
			// The first failure may be a TLS one: say so at once.
			diagnosed = true
			if err := Diagnose(dctx, c); err != nil {
				return err
			}
		}
		if conn.WaitForStateChange(dctx, st) {
			continue
		}
		if cause := context.Cause(dctx); !errors.Is(cause, errDialTimeout) {
			return cause
		}
		if err := Diagnose(ctx, c); err != nil {
			return err
		}
		return &DialError{Endpoints: joinEndpoints(c.Endpoints), Err: fmt.Errorf("no connection within --dial-timeout %v", c.DialTimeout)}
	}
	return nil
}

// probeWait bounds each endpoint's TLS probe.
const probeWait = time.Second

// Diagnose dials every endpoint of c with c's TLS settings and returns an
// error wrapping ErrTLS for the first handshake that fails for a reason
// retrying cannot fix. It returns nil without TLS, or when every endpoint
// that answers completes the handshake.
func Diagnose(ctx context.Context, c Config) error {
	if !c.TLS() {
		return nil
	}
	eps, err := c.endpoints()
	if err != nil {
		return err
	}
	t, err := c.tlsConfig()
	if err != nil {
		return err
	}
	for _, ep := range eps {
		if err := probeTLS(ctx, ep, t, probeWait); err != nil {
			return &DialError{Endpoints: ep, TLS: true, Err: fmt.Errorf("%w%s", err, tlsHint(err))}
		}
	}
	return nil
}

func joinEndpoints(eps []string) string {
	s := strings.Join(eps, ",")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// DialError is a connection that could not be made. It matches ErrTLS or
// ErrUnreachable with errors.Is, and reads "etcd unreachable at
// <endpoints>: <cause>" on one line.
type DialError struct {
	// Endpoints are the endpoints tried, or the one whose handshake failed.
	Endpoints string
	// TLS is true when the TLS handshake failed.
	TLS bool
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *DialError) Error() string {
	if e.TLS {
		return fmt.Sprintf("etcd unreachable at %s: TLS handshake failed: %v", e.Endpoints, e.Err)
	}
	return fmt.Sprintf("etcd unreachable at %s: %v", e.Endpoints, e.Err)
}

// Unwrap returns the sentinel and the cause.
func (e *DialError) Unwrap() []error {
	if e.TLS {
		return []error{ErrTLS, e.Err}
	}
	return []error{ErrUnreachable, e.Err}
}
