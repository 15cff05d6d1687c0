package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/retry"
)

// ErrSeatLost is returned by Sidecar.Run when the seat was taken away
// (lease lost, force-released, instance gone, pool deleted). It wraps the
// claim's own error.
var ErrSeatLost = errors.New("agent: seat lost")

// ErrWaitTimeout is returned by Sidecar.Run when no seat was granted
// within the configured wait timeout.
var ErrWaitTimeout = errors.New("agent: no seat within the wait timeout")

// Sidecar claims one seat for the lifetime of a pod: it claims at start,
// publishes the claim in the seat file and on its probes, releases on
// shutdown, and reports a loss by failing its probes and returning
// ErrSeatLost so that the kubelet restarts it.
type Sidecar struct {
	co   *coordinator.Coordinator
	cfg  config.Sidecar
	file SeatFile
	o    options

	mu     sync.Mutex
	rec    SeatRecord
	waitSt *coordinator.WaitStatus // while waiting with a known reason (sidecar_wait.go)
	sess   *coordinator.Session    // of the seat held: when its lease can end (sidecar_lease.go)
	risky  bool                    // the lease could end within AppStopWithin (logged once)

	waitLogEvery time.Duration // how often a wait repeats its reason in the log
}

// NewSidecar returns a sidecar for cfg. cfg must have passed
// config.ValidateSidecar.
func NewSidecar(co *coordinator.Coordinator, cfg config.Sidecar, opts ...Option) *Sidecar {
	return &Sidecar{
		co: co, cfg: cfg, o: buildOptions(opts),
		file:         SeatFile{JSONPath: cfg.SeatFile, EnvPath: cfg.EnvPath()},
		rec:          SeatRecord{State: StateWaiting, Pool: cfg.Pool, Seat: -1, Holder: cfg.Holder},
		waitLogEvery: defaultWaitLogInterval,
	}
}

// Record returns the current claim record.
func (s *Sidecar) Record() SeatRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec
}

// Held reports whether the seat is held.
func (s *Sidecar) Held() bool { return s.Record().State == StateHeld }

// update records rec and writes it to the seat file. A held seat is
// written to the file before the probes pass; any other state fails the
// probes before the file is rewritten. Either way nobody is told "held" by
// one channel while the other still says otherwise for long.
func (s *Sidecar) update(rec SeatRecord) error {
	rec.UpdatedAt = time.Now().UTC()
	if rec.State != StateHeld {
		s.set(rec)
	}
	if err := s.file.Write(rec); err != nil {
		s.o.log.Error("cannot write seat file", "path", s.file.JSONPath, "err", err)
		return err
	}
	s.set(rec)
	return nil
}

func (s *Sidecar) set(rec SeatRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec = rec
}

// Run takes back the seat of a previous run that crashed (see
// sidecar_resume.go) or else claims a seat, waiting up to the wait timeout
// (with a new session if the first is lost while it waits), and holds it
// until ctx ends (then
// it releases the seat and returns nil) or the seat is lost (then it
// records the loss, keeps failing its probes for the loss grace and
// returns an error wrapping ErrSeatLost).
func (s *Sidecar) Run(ctx context.Context) error {
	sess, cl, err := s.obtain(ctx)
	s.clearWait()
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting: nothing held
		}
		rec := s.Record()
		rec.State, rec.Error = StateFailed, err.Error()
		_ = s.update(rec)
		return err
	}
	s.saveState(resumeState{Pool: cl.Pool(), Lease: int64(sess.Lease()), State: StateHeld, Seat: cl.Seat(), Token: cl.Token()})
	held, gone := s.heldRecord(ctx, sess, cl) // may read etcd: the seat can go meanwhile
	if gone {
		// Resumed on an instance gone since (a restart during the hold
		// after its loss): the claim's monitor says so in a moment. Never
		// published as held (found by a review, 2026-12-05: it was, for
		// about 80 ms, and /readyz answered 200).
		select {
		case <-cl.Done():
		case <-ctx.Done():
			s.release(sess, cl)
			return nil
		}
	}
	select {
	case <-cl.Done(): // never published as held
		return s.lose(ctx, sess, cl)
	default:
	}
	s.holding(sess)
	if err := s.update(held); err != nil {
		s.release(sess, cl)
		return err
	}
	log := s.o.log.With("pool", s.cfg.Pool, "seat", cl.Seat(), "token", cl.Token(), "lease", leaseHex(sess.Lease()))
	log.Info("seat held", "instance", s.Record().Instance)
	for {
		// The claim's monitor runs since cl.Done above: the instance may
		// be draining already (a seat resumed during a drain).
		on, drainMoved := cl.DrainState()
		if rec := s.Record(); rec.Draining != on {
			rec.Draining = on
			_ = s.update(rec) // the probes keep passing: the seat is held
			if on {
				log.Warn("instance draining; the seat goes at the drain's timeout", "instance", rec.Instance)
			} else {
				log.Info("instance ready again; its drain was undone", "instance", rec.Instance)
			}
		}
		select {
		case <-ctx.Done():
			s.release(sess, cl)
			log.Info("seat released")
			return nil
		case <-cl.Done():
			return s.lose(ctx, sess, cl)
		case <-drainMoved:
		}
	}
}

// obtain takes back the seat of a previous run, or else publishes that it
// waits and claims one. The seat file is not rewritten before a resume, so
// an app reading it meanwhile still sees the seat it holds.
func (s *Sidecar) obtain(ctx context.Context) (*coordinator.Session, *coordinator.Claim, error) {
	if sess, cl := s.resume(ctx); cl != nil {
		return sess, cl, nil
	}
	if err := s.update(s.Record()); err != nil {
		return nil, nil, err
	}
	sess, cl, err := s.claim(ctx)
	if err != nil {
		s.dropState()
	}
	return sess, cl, err
}

// claim opens a session and claims a seat, both bounded by the wait
// timeout. When the session is lost while it waits (its lease expired or
// was revoked before a seat was granted), it opens a new session and
// queues again, at the back of the line: no seat was held, so only the
// place in the queue is lost.
func (s *Sidecar) claim(ctx context.Context) (*coordinator.Session, *coordinator.Claim, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if s.cfg.WaitTimeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, s.cfg.WaitTimeout.D())
	}
	defer cancel()
	defer s.logWhileWaiting(wctx)()
	bo := reachPolicy.Backoff()
	for {
		sess, err := s.o.openSession(wctx, s.co.Client(), s.cfg.TTL.D())
		if err != nil {
			return nil, nil, s.waitErr(wctx, err)
		}
		s.saveState(resumeState{Pool: s.cfg.Pool, Lease: int64(sess.Lease()), State: StateWaiting, Seat: -1})
		log := s.o.log.With("pool", s.cfg.Pool, "lease", leaseHex(sess.Lease()))
		log.Info("claiming a seat", "holder", s.cfg.Holder)
		cl, err := s.co.Claim(wctx, sess, s.cfg.Pool, s.claimOptions()...)
		if err == nil {
			return sess, cl, nil
		}
		s.o.closeSession(sess)
		if !errors.Is(err, coordinator.ErrSessionExpired) || wctx.Err() != nil {
			return nil, nil, s.waitErr(wctx, err)
		}
		log.Warn("session lost while waiting for a seat; queueing again with a new session", "err", err)
		s.o.onSessionLost()
		if !retry.Sleep(wctx, bo.NextBackOff()) {
			return nil, nil, s.waitErr(wctx, err)
		}
	}
}

func (s *Sidecar) claimOptions() []coordinator.ClaimOption {
	opts := []coordinator.ClaimOption{coordinator.WithWait(), coordinator.WithTenant(s.cfg.Tenant), coordinator.WithLabels(s.cfg.Labels),
		coordinator.WithWaitStatus(s.onWait)}
	if s.cfg.Holder != "" {
		opts = append(opts, coordinator.WithHolder(s.cfg.Holder))
	}
	if s.cfg.Instance != "" {
		opts = append(opts, coordinator.WithInstance(s.cfg.Instance))
	}
	return opts
}

// waitErr says why no seat was obtained: at the wait timeout, why it was
// still waiting rather than a bare "context deadline exceeded".
func (s *Sidecar) waitErr(wctx context.Context, err error) error {
	if errors.Is(wctx.Err(), context.DeadlineExceeded) {
		if st, ok := s.WaitStatus(); ok {
			return fmt.Errorf("%w (%v) for pool %q: still waiting: %s", ErrWaitTimeout, s.cfg.WaitTimeout, s.cfg.Pool, st)
		}
		return fmt.Errorf("%w (%v) for pool %q: %v", ErrWaitTimeout, s.cfg.WaitTimeout, s.cfg.Pool, err)
	}
	return fmt.Errorf("agent: claim a seat of %q: %w", s.cfg.Pool, err)
}

// heldRecord describes a granted claim, with the instance's address and
// labels (read back if the claim only knows the instance's ID, as a claim
// that Adopt took back after its instance went does). gone reports that
// the read found no such instance.
func (s *Sidecar) heldRecord(ctx context.Context, sess *coordinator.Session, cl *coordinator.Claim) (rec SeatRecord, gone bool) {
	rec = SeatRecord{
		State: StateHeld, Pool: cl.Pool(), Seat: cl.Seat(), Token: cl.Token(), Lease: leaseHex(sess.Lease()),
		Holder: cl.Holder(), Tenant: cl.Tenant(),
	}
	in, ok := cl.Instance()
	if !ok {
		return rec, false
	}
	if in.Addr == "" && in.Labels == nil {
		rctx, cancel := context.WithTimeout(ctx, s.o.requestTimeout)
		all, err := s.co.Instances(rctx, cl.Pool())
		cancel()
		gone = err == nil
		for _, x := range all {
			if err == nil && x.ID == in.ID {
				in, gone = x, false
			}
		}
	}
	rec.Instance, rec.Address, rec.Labels = in.ID, in.Addr, in.Labels
	return rec, gone
}

// release tells the app first (the record, the seat file, /readyz), then
// gives the seat back and revokes the lease: the other way round, a
// waiter was granted the seat while this pod still said it held it
// (found by a review, 2026-12-05).
func (s *Sidecar) release(sess *coordinator.Session, cl *coordinator.Claim) {
	rec := s.Record()
	rec.State, rec.Draining = StateReleased, false
	_ = s.update(rec)
	s.releaseSeat(cl)
	s.o.closeSession(sess)
	s.dropState()
}

// releaseSeat releases cl's seat within one request timeout; a seat
// already gone (ErrNotHeld) is not worth a warning.
func (s *Sidecar) releaseSeat(cl *coordinator.Claim) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.requestTimeout)
	defer cancel()
	if err := cl.Release(ctx); err != nil && !errors.Is(err, coordinator.ErrNotHeld) {
		s.o.log.Warn("release", "pool", cl.Pool(), "seat", cl.Seat(), "token", cl.Token(), "err", err)
	}
}

// appStops waits while an app told at told that its seat is gone may
// still be stopping (lose, notResumed): the loss grace, which ctx's end
// (SIGTERM) cuts short, and AppStopWithin from told, which it does not;
// either ends early when ended closes (the session, and the seat with it,
// is gone).
func (s *Sidecar) appStops(ctx context.Context, told time.Time, ended <-chan struct{}) {
	select {
	case <-ctx.Done():
	case <-ended:
		return
	case <-time.After(s.cfg.LossGrace.D()):
	}
	select {
	case <-ended:
	case <-time.After(time.Until(told.Add(s.cfg.AppStopWithin.D()))):
	}
}

// lose records a lost seat, serves the failure for the loss grace, and
// returns the loss. After the instance's loss it keeps its session while
// the app, its /readyz failed, may still be stopping (appStops): the seat
// and the instance's slot are still held then
// (coordinator.WithInstanceGoneHold: the session's TTL, longer), so that
// nobody binds the instance again, should its agent register it anew.
// Closing the session frees them.
func (s *Sidecar) lose(ctx context.Context, sess *coordinator.Session, cl *coordinator.Claim) error {
	cause := cl.Err()
	rec := s.Record()
	rec.State, rec.Reason, rec.Error, rec.Draining = StateLost, coordinator.LossReason(cause), cause.Error(), false
	_ = s.update(rec)
	s.o.log.Error("seat lost", "pool", cl.Pool(), "seat", cl.Seat(), "token", cl.Token(),
		"lease", leaseHex(sess.Lease()), "reason", rec.Reason, "err", cause)
	if errors.Is(cause, coordinator.ErrSessionExpired) {
		s.o.onSessionLost()
	}
	if errors.Is(cause, coordinator.ErrInstanceGone) {
		// A SIGTERM ends the loss grace, not the app's stop (found by a
		// review, 2026-12-05: the slot was freed at once).
		s.appStops(ctx, time.Now(), nil)
	} else {
		retry.Sleep(ctx, s.cfg.LossGrace.D())
	}
	if errors.Is(cause, coordinator.ErrInstanceGone) && sess.Err() == nil {
		// Still held (appStops): a release records the instance's loss,
		// where the session's revoke would read as an expiry.
		s.releaseSeat(cl)
	}
	s.o.closeSession(sess)
	s.dropState()
	return fmt.Errorf("%w: %w", ErrSeatLost, cause)
}
