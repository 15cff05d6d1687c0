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
// a safety margin. The server cannot expire the lease before send + TTL
// (it renews when it receives the request, which is later), so Done closes
// at least margin before anyone else can be granted a seat of this session.
//
// What the margin must cover, and its default:
//
//   - the delay between the deadline and Done closing: a timer goroutine,
//     not the keepalive RPC, closes Done, so the delay is Go scheduling
//     (well under 10 ms on an idle machine, about 100 ms on a 2-core
//     machine under full load, longer under a stop-the-world pause or a
//     descheduled process);
//   - the holder's own reaction to Done;
//   - the local clock running slow against the leader's over one TTL
//     (negligible with NTP; Go uses the monotonic clock).
//
// The default is TTL/10, at least 500 ms; WithMargin changes it. A process
// that is paused for longer than the margin (SIGSTOP, swapping) can still
// act after its seat was granted again: fence such writes with the token.
//
// Done can close while the lease is in fact still alive (for example during
// a long partition); it never closes after the earliest server-side expiry
// unless the process is paused for longer than the margin.
type Session struct {
	cli       *clientv3.Client
	id        clientv3.LeaseID
	ttl       time.Duration
	margin    time.Duration
	onFailure func(error)
	onMoved   func(time.Time)
	borrowed  bool // someone else keeps the lease alive; see borrow.go

	mu       sync.Mutex
	deadline time.Time // local deadline; Done closes when it passes
	lastOK   time.Time // when the last successful keepalive was sent
	err      error

	life   context.Context // cancelled when the session ends
	cancel context.CancelFunc
	timer  *time.Timer   // watchdog: fires at the deadline
	donec  chan struct{} // closed when the session is lost or closed
	loopc  chan struct{} // closed when the keepalive loop has exited
	once   sync.Once

	names names // claim nonces to reuse (names.go)
}

// SessionOption configures a Session.
type SessionOption func(*sessionOptions)

type sessionOptions struct {
	ttl       time.Duration   // default DefaultSeatTTL
	margin    time.Duration   // default ttl/10, at least 500ms
	onFailure func(error)     // default: nothing
	onMoved   func(time.Time) // default: nothing
	borrowed  bool            // set by BorrowSession only
}

// MinMargin is the smallest default local-deadline margin; see Session.
const MinMargin = 500 * time.Millisecond

// WithTTL sets the lease TTL: MinTTL..MaxTTL. Default DefaultSeatTTL.
func WithTTL(d time.Duration) SessionOption { return func(o *sessionOptions) { o.ttl = d } }

// WithMargin sets how long before the earliest possible server-side expiry
// Done closes. Default TTL/10, at least MinMargin; it must be below TTL/3.
func WithMargin(d time.Duration) SessionOption { return func(o *sessionOptions) { o.margin = d } }

// WithKeepAliveFailure calls f after each keepalive attempt that fails
// while the session lives, and once more when the local deadline passes
// without an answer (before Done closes). f must not block. Default:
// nothing.
func WithKeepAliveFailure(f func(error)) SessionOption {
	return func(o *sessionOptions) { o.onFailure = f }
}

// WithDeadlineMoved calls f with the new local deadline each time a
// keepalive answer moves it (not for the first, which Deadline returns
// once NewSession has returned). Calls come one at a time, in order, from
// the session's keepalive goroutine, outside its lock; f must not block.
// It is for a watchdog outside this process that must stop work by the
// deadline when this process cannot (poolctl run's guard, which kills the
// command when poolctl is stopped). Default: nothing.
func WithDeadlineMoved(f func(deadline time.Time)) SessionOption {
	return func(o *sessionOptions) { o.onMoved = f }
}

func (o *sessionOptions) validate() error {
	if o.ttl < MinTTL || o.ttl > MaxTTL {
		return fmt.Errorf("%w: session TTL %v is outside %v..%v", ErrInvalid, o.ttl, MinTTL, MaxTTL)
	}
	if o.margin == 0 {
		o.margin = max(o.ttl/10, MinMargin)
	}
	if o.margin <= 0 || o.margin >= o.ttl/3 {
		return fmt.Errorf("%w: margin %v must be in (0, TTL/3 = %v)", ErrInvalid, o.margin, o.ttl/3)
	}
	return nil
}

// NewSession grants a lease and keeps it alive until Close or loss. ctx
// bounds the grant only.
func NewSession(ctx context.Context, cli *clientv3.Client, opts ...SessionOption) (*Session, error) {
	o := sessionOptions{ttl: DefaultSeatTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	sent := time.Now()
	resp, err := cli.Grant(ctx, int64(o.ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("coordinator: grant lease: %w", err)
	}
	return startSession(cli, resp.ID, time.Duration(resp.TTL)*time.Second, sent, o), nil
}

// startSession starts keeping lease id alive; sent is when the request that
// last renewed it (the grant, or a keepalive) was sent, ttl what it granted.
func startSession(cli *clientv3.Client, id clientv3.LeaseID, ttl time.Duration, sent time.Time, o sessionOptions) *Session {
	life, cancel := context.WithCancel(context.Background())
	s := &Session{
		cli: cli, id: id, ttl: ttl, margin: o.margin, onFailure: o.onFailure, onMoved: o.onMoved, borrowed: o.borrowed,
		life: life, cancel: cancel, donec: make(chan struct{}), loopc: make(chan struct{}),
		deadline: sent.Add(ttl - o.margin), lastOK: sent,
	}
	s.mu.Lock()
	s.timer = time.AfterFunc(time.Until(s.deadline), s.checkDeadline)
	s.mu.Unlock()
	go s.keepAlive(life)
	return s
}

// expiredErr is the error for work that stopped because the session ended.
func expiredErr(lease clientv3.LeaseID) error {
	return fmt.Errorf("%w: lease %x", ErrSessionExpired, lease)
}

// Lease returns the session's lease ID.
func (s *Session) Lease() clientv3.LeaseID { return s.id }

// TTL returns the TTL the server granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Margin returns how long before the earliest server-side expiry Done closes.
func (s *Session) Margin() time.Duration { return s.margin }

// Client returns the etcd client the session uses.
func (s *Session) Client() *clientv3.Client { return s.cli }

// Done is closed when the session is lost (the server reported the lease
// gone, or the local deadline passed without a successful keepalive) or
// closed. It closes no later than the local deadline, whatever etcd does.
func (s *Session) Done() <-chan struct{} { return s.donec }

// Err returns nil while the session is live, an error wrapping
// ErrSessionExpired (saying why) after loss, and ErrClosed after Close.
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

// live reports whether the session may still hold seats: not ended, and
// its local deadline not passed (the watchdog may not have run yet).
func (s *Session) live() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil && time.Now().Before(s.deadline)
}

// bind returns a context that ends with ctx or when the session ends,
// whichever is first; its cause is then ErrSessionExpired. Every etcd call
// made for a claimant runs under it, so none can outlive the session.
func (s *Session) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	bctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.life, func() { cancel(s.lostErr()) })
	return bctx, func() { stop(); cancel(context.Canceled) }
}

// lostErr is the error for work that stopped because the session ended:
// it wraps ErrSessionExpired and says why.
func (s *Session) lostErr() error {
	if err := s.Err(); err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return expiredErr(s.id)
}

// Close stops the keepalives and revokes the lease, which deletes every key
// bound to it. ctx bounds the revoke. It is idempotent and waits for the
// keepalive goroutine to exit. A borrowed session (BorrowSession) only
// stops following its lease: the lease is not revoked.
func (s *Session) Close(ctx context.Context) error {
	s.finish(ErrClosed)
	<-s.loopc
	if s.borrowed {
		return nil // the lease is not ours to revoke
	}
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
		s.timer.Stop()
		s.mu.Unlock()
		s.cancel()
		close(s.donec)
	})
}

// checkDeadline is the watchdog: it ends the session once the deadline has
// passed, and otherwise re-arms itself for the (extended) deadline.
func (s *Session) checkDeadline() {
	s.mu.Lock()
	left, lastOK := time.Until(s.deadline), s.lastOK
	if left > 0 && s.err == nil {
		s.timer.Reset(left)
	}
	s.mu.Unlock()
	if left <= 0 {
		err := fmt.Errorf("%w: lease %x: %w, no keepalive answered since %s",
			ErrSessionExpired, s.id, ErrLocalDeadline, lastOK.Format("15:04:05.000"))
		if s.onFailure != nil && s.Err() == nil {
			s.onFailure(err) // counted before Done closes, so whoever wakes on Done sees it
		}
		s.finish(err)
	}
}

// renew sends one lease request, bounded by the deadline: a keepalive, or
// for a borrowed session a TTL query (ask returns the TTL left, in seconds).
// A live answer moves the deadline; a missing lease ends the session.
// Failures are reported while the session lives; the watchdog reports the
// last one, the deadline passing, before Done closes. It returns the
// whether the session ended and the request's error.
func (s *Session) renew(ctx context.Context, ask func(context.Context) (int64, error)) (bool, error) {
	sent := time.Now()
	kctx, cancel := context.WithDeadline(ctx, s.Deadline())
	ttl, err := ask(kctx)
	cancel()
	if err != nil && s.onFailure != nil && s.Err() == nil {
		s.onFailure(err)
	}
	switch {
	case err == nil && ttl > 0:
		s.extend(sent, time.Duration(ttl)*time.Second)
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && ttl <= 0):
		s.finish(fmt.Errorf("%w: lease %x not found on the server (expired or revoked)", ErrSessionExpired, s.id))
		return true, err
	}
	return false, err
}

// keepAlive sends one keepalive every TTL/3 and moves the deadline forward
// on each success. The watchdog, not this loop, ends the session at the
// deadline, so a keepalive stuck in the network never delays Done.
func (s *Session) keepAlive(ctx context.Context) {
	defer close(s.loopc)
	if s.borrowed {
		s.followLease(ctx)
		return
	}
	interval := s.ttl / 3
	for {
		ended, err := s.renew(ctx, func(ctx context.Context) (int64, error) {
			resp, err := s.cli.KeepAliveOnce(ctx, s.id)
			if err != nil {
				return 0, err
			}
			return resp.TTL, nil
		})
		if ended {
			return
		}
		wait := interval
		if err != nil {
			wait = 200 * time.Millisecond // retry soon, the deadline is running
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// extend moves the deadline after a keepalive sent at sent succeeded. A
// late answer to an old request never moves it back.
func (s *Session) extend(sent time.Time, ttl time.Duration) {
	s.mu.Lock()
	if s.err != nil || !time.Now().Before(s.deadline) {
		s.mu.Unlock()
		return // lost already; the watchdog is about to say so
	}
	d := sent.Add(ttl - s.margin)
	moved := d.After(s.deadline)
	if moved {
		s.deadline, s.lastOK = d, sent
	}
	s.mu.Unlock()
	if moved && s.onMoved != nil {
		s.onMoved(d)
	}
}
