package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Session is a lease kept alive for a claimant or an agent. Every key a
// claim writes is bound to it, so when the process dies the keys go with the
// lease and no janitor is needed.
//
// Unlike concurrency.Session, Session keeps a local deadline: the time the
// last successful keepalive was SENT plus the TTL the server granted, minus
// a safety margin. The server cannot expire the lease before that instant,
// so a holder that stops when Done closes has stopped before anyone else can
// be granted its seat, provided its clock does not run more than the margin
// slow over one TTL. Done can therefore close while the lease is in fact
// still alive (for example during a long partition); it never closes late.
type Session struct {
	cli       *clientv3.Client
	id        clientv3.LeaseID
	ttl       time.Duration
	margin    time.Duration
	onFailure func(error)

	mu       sync.Mutex
	deadline time.Time
	err      error

	cancel context.CancelFunc
	donec  chan struct{} // closed when the session is lost or closed
	loopc  chan struct{} // closed when the keepalive loop has exited
	once   sync.Once
}

// SessionOption configures a Session.
type SessionOption func(*sessionOptions)

type sessionOptions struct {
	ttl       time.Duration // default DefaultSeatTTL
	margin    time.Duration // default ttl/10, at least 200ms
	onFailure func(error)   // default: nothing
}

// WithTTL sets the lease TTL: MinTTL..MaxTTL. Default DefaultSeatTTL.
func WithTTL(d time.Duration) SessionOption { return func(o *sessionOptions) { o.ttl = d } }

// WithMargin sets how long before the earliest possible server-side expiry
// Done closes. Default TTL/10, at least 200ms; it must be below TTL/3.
func WithMargin(d time.Duration) SessionOption { return func(o *sessionOptions) { o.margin = d } }

// WithKeepAliveFailure calls f, from the keepalive goroutine, after each
// keepalive attempt that fails. f must not block. Default: nothing.
func WithKeepAliveFailure(f func(error)) SessionOption {
	return func(o *sessionOptions) { o.onFailure = f }
}

// NewSession grants a lease and keeps it alive until Close or loss. ctx
// bounds the grant only.
func NewSession(ctx context.Context, cli *clientv3.Client, opts ...SessionOption) (*Session, error) {
	o := sessionOptions{ttl: DefaultSeatTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if o.ttl < MinTTL || o.ttl > MaxTTL {
		return nil, fmt.Errorf("%w: session TTL %v is outside %v..%v", ErrInvalid, o.ttl, MinTTL, MaxTTL)
	}
	if o.margin == 0 {
		o.margin = max(o.ttl/10, 200*time.Millisecond)
	}
	if o.margin <= 0 || o.margin >= o.ttl/3 {
		return nil, fmt.Errorf("%w: margin %v must be in (0, TTL/3)", ErrInvalid, o.margin)
	}
	sent := time.Now()
	resp, err := cli.Grant(ctx, int64(o.ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("coordinator: grant lease: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	s := &Session{
		cli: cli, id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, margin: o.margin, onFailure: o.onFailure,
		cancel: cancel, donec: make(chan struct{}), loopc: make(chan struct{}),
	}
	s.deadline = sent.Add(s.ttl - s.margin)
	go s.keepAlive(lctx)
	return s, nil
}

// expiredErr is the error for work that stopped because the session ended.
func expiredErr(lease clientv3.LeaseID) error {
	return fmt.Errorf("%w: lease %x", ErrSessionExpired, lease)
}

// Lease returns the session's lease ID.
func (s *Session) Lease() clientv3.LeaseID { return s.id }

// TTL returns the TTL the server granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Client returns the etcd client the session uses.
func (s *Session) Client() *clientv3.Client { return s.cli }

// Done is closed when the session is lost (the server reported the lease
// gone, or the local deadline passed without a successful keepalive) or
// closed.
func (s *Session) Done() <-chan struct{} { return s.donec }

// Err returns nil while the session is live, ErrSessionExpired after loss
// and ErrClosed after Close.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Deadline returns the local deadline: the session is considered lost after it.
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// Close stops the keepalives and revokes the lease, which deletes every key
// bound to it. ctx bounds the revoke. It is idempotent and waits for the
// keepalive goroutine to exit.
func (s *Session) Close(ctx context.Context) error {
	s.finish(ErrClosed)
	<-s.loopc
	_, err := s.cli.Revoke(ctx, s.id)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("coordinator: revoke lease %x: %w", s.id, err)
	}
	return nil
}

// Orphan stops keepalives without revoking: the lease, and every seat bound
// to it, expire after the TTL. It models a process that hangs or dies.
func (s *Session) Orphan() {
	s.finish(ErrClosed)
	<-s.loopc
}

func (s *Session) finish(err error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		s.cancel()
		close(s.donec)
	})
}

// keepAlive sends one keepalive every TTL/3 and moves the deadline forward
// on each success. It gives up when the deadline passes.
func (s *Session) keepAlive(ctx context.Context) {
	defer close(s.loopc)
	interval := s.ttl / 3
	for {
		deadline := s.Deadline()
		if !time.Now().Before(deadline) {
			s.finish(ErrSessionExpired)
			return
		}
		sent := time.Now()
		kctx, cancel := context.WithDeadline(ctx, deadline)
		resp, err := s.cli.KeepAliveOnce(kctx, s.id)
		cancel()
		if err != nil && ctx.Err() == nil && s.onFailure != nil {
			s.onFailure(err)
		}
		switch {
		case err == nil && resp.TTL > 0:
			s.mu.Lock()
			s.deadline = sent.Add(time.Duration(resp.TTL)*time.Second - s.margin)
			s.mu.Unlock()
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
			s.finish(ErrSessionExpired)
			return
		}
		wait := interval
		if err != nil {
			wait = 200 * time.Millisecond // retry soon, the deadline is running
		}
		t := time.NewTimer(min(wait, time.Until(s.Deadline())))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
