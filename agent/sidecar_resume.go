package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"github.com/etcdpool/etcdpool/internal/retry"
)

// Surviving a restart. A native sidecar that crashes or is OOM-killed is
// restarted by the kubelet within seconds, into the same pod and the same
// emptyDir. The sidecar keeps its lease (and, once granted, its seat and
// token) in a state file next to the seat file, so that the next run can
// take the seat back instead of queueing behind everyone while its old
// seat waits to expire:
//
//   - held, and the lease still alive: resume the session and adopt the
//     seat if etcd shows it still held under that token and lease (both
//     checked by the server, see coordinator.Adopt): same seat, same token.
//   - anything else (the lease expired, the seat was lost, the previous run
//     was still waiting, the pool changed, the lease's TTL is too short for
//     sidecar.appStopWithin): revoke the old lease, which
//     frees at once whatever is still bound to it (a queue entry that would
//     otherwise stand in line until its TTL, a seat granted just before the
//     crash), and claim afresh, at the back of the queue. A seat the
//     previous run held is first written lost in the seat file, and its
//     lease kept alive while the app stops (notResumed).
//
// The state file is written before the seat file says "held", and the lease
// is recorded before the claim is sent, so a crash at any point leaves
// either a state to resume or a lease to revoke. Resuming is only sound
// because the previous run is dead: one sidecar per seat file.

// resumeState is what the state file holds.
type resumeState struct {
	// Pool is the pool the lease claims from.
	Pool string `json:"pool"`
	// Lease is the session lease.
	Lease int64 `json:"lease"`
	// State is StateWaiting until the seat is granted, then StateHeld.
	State string `json:"state"`
	// Seat and Token name the held seat; -1 and 0 while waiting.
	Seat  int   `json:"seat"`
	Token int64 `json:"token"`
}

// StatePath returns where the sidecar whose seat file is seatFile keeps
// its resume state: the seat file's path with ".state" appended, written
// with mode 0600 (less the umask).
func StatePath(seatFile string) string { return seatFile + ".state" }

// saveState records st. A failure is logged: it costs the resume, not
// safety.
func (s *Sidecar) saveState(st resumeState) {
	b, _ := json.Marshal(st)
	if err := WriteFileAtomic(StatePath(s.cfg.SeatFile), append(b, '\n'), stateFileMode); err != nil {
		s.o.log.Warn("cannot write the resume state; a restart will claim afresh", "err", err)
	}
}

// dropState removes the state once the lease is revoked or given up.
func (s *Sidecar) dropState() {
	if err := os.Remove(StatePath(s.cfg.SeatFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.o.log.Warn("cannot remove the resume state", "err", err)
	}
}

func (s *Sidecar) loadState() (resumeState, bool) {
	var st resumeState
	b, err := os.ReadFile(StatePath(s.cfg.SeatFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, false
	}
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil || st.Lease == 0 {
		s.o.log.Warn("ignoring an unreadable resume state", "path", StatePath(s.cfg.SeatFile), "err", err)
		return st, false
	}
	return st, true
}

// resume takes back the session and seat of the previous run, or returns
// nils after revoking whatever that run left (see above). It gives up on
// etcd after one TTL: a lease that could not be kept alive that long may
// be gone.
func (s *Sidecar) resume(ctx context.Context) (*coordinator.Session, *coordinator.Claim) {
	st, ok := s.loadState()
	if !ok {
		return nil, nil
	}
	lease := clientv3.LeaseID(st.Lease)
	log := s.o.log.With("pool", st.Pool, "lease", leaseHex(lease), "seat", st.Seat, "token", st.Token)
	if st.State != StateHeld {
		log.Info("previous run held no seat; revoking its lease and claiming afresh", "state", st.State)
		s.revoke(lease)
		s.dropState()
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.TTL.D())
	sess, cl, err := s.adopt(rctx, lease, st)
	cancel()
	if err == nil {
		log.Info("seat resumed after a restart")
		return sess, cl
	}
	log.Info("cannot resume the previous seat; claiming afresh", "err", err)
	s.notResumed(ctx, st, sess, err)
	s.dropState()
	return nil, nil
}

// notResumed ends the previous run's seat, which could not be taken back
// (err), while its app may still run on it: the seat file, which still
// says held, is rewritten as lost first; then, if the old lease lives
// (sess, resumed) and the seat may still be bound to it, the lease is kept
// alive while the app stops (appStops), as after a loss (lose), before it
// is revoked, which frees the seat. Without a session the lease
// could not be resumed within a TTL: it is revoked at once if etcd said it
// is gone, else after that same wait, since it may live on. Found by a review (2026-12-05): the lease was revoked first,
// and a waiter was granted the seat while this pod's seat file said held.
func (s *Sidecar) notResumed(ctx context.Context, st resumeState, sess *coordinator.Session, err error) {
	rec := SeatRecord{State: StateLost, Pool: st.Pool, Seat: st.Seat, Token: st.Token, Lease: leaseHex(clientv3.LeaseID(st.Lease)),
		Holder: s.cfg.Holder, Reason: coordinator.LossReason(err), Error: "not resumed after a restart: " + err.Error(), UpdatedAt: time.Now().UTC()}
	if werr := s.file.Write(rec); werr != nil {
		s.o.log.Error("cannot write seat file", "path", s.file.JSONPath, "err", werr)
	}
	told := time.Now()
	if sess == nil {
		if !errors.Is(err, coordinator.ErrSessionExpired) {
			// etcd did not answer for a TTL, but the lease may live on (a
			// leader change renews every lease): the app is given its
			// time before a revoke could free the seat.
			s.appStops(ctx, told, nil)
		}
		s.revoke(clientv3.LeaseID(st.Lease))
		return
	}
	if !errors.Is(err, coordinator.ErrNotHeld) && !errors.Is(err, coordinator.ErrStaleToken) { // it may still hold the seat
		s.appStops(ctx, told, sess.Done())
	}
	s.o.closeSession(sess)
}

// adopt resumes lease and adopts the seat of st, retrying what may be
// transient until ctx ends. When it fails after resuming the lease, it
// returns the session too, still live: the caller ends it (notResumed).
func (s *Sidecar) adopt(ctx context.Context, lease clientv3.LeaseID, st resumeState) (*coordinator.Session, *coordinator.Claim, error) {
	onFailure := func(err error) {
		s.o.log.Debug("keepalive failed", "err", err)
		s.o.onKeepAliveFailure(err)
	}
	var sess *coordinator.Session
	err := s.retry(ctx, func(rctx context.Context) (err error) {
		sess, err = coordinator.ResumeSession(rctx, s.co.Client(), lease, coordinator.WithKeepAliveFailure(onFailure))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if st.Pool != s.cfg.Pool { // the config changed since the seat was claimed
		return sess, nil, fmt.Errorf("the previous run held a seat of pool %q, not %q", st.Pool, s.cfg.Pool)
	}
	if err := s.leaseFits(sess); err != nil { // the config changed since the lease was granted
		return sess, nil, err
	}
	var cl *coordinator.Claim
	err = s.retry(ctx, func(rctx context.Context) (err error) {
		cl, err = s.co.Adopt(rctx, sess, st.Pool, st.Seat, st.Token)
		return err
	})
	if err != nil {
		return sess, nil, err
	}
	return sess, cl, nil
}

// retry calls f, each call bounded by the request timeout, until it
// succeeds, fails for good (the lease or seat is gone, bad input, a
// refusal such as permission denied), or ctx ends. Each retry is logged.
func (s *Sidecar) retry(ctx context.Context, f func(context.Context) error) error {
	return retry.Do(ctx, resumePolicy, func() error {
		rctx, cancel := context.WithTimeout(ctx, s.o.requestTimeout)
		defer cancel()
		err := f(rctx)
		if errors.Is(err, coordinator.ErrSessionExpired) || errors.Is(err, coordinator.ErrNotHeld) ||
			errors.Is(err, coordinator.ErrStaleToken) || errors.Is(err, coordinator.ErrInvalid) || etcdclient.IsPermanent(err) {
			return retry.Permanent(err)
		}
		return err
	}, func(err error, d time.Duration) {
		s.o.log.Warn("cannot resume the previous seat yet; retrying", "err", err, "retry", d)
	})
}

// revoke revokes a lease this sidecar no longer uses, bounded by the
// request timeout; one that cannot be revoked expires after its TTL.
func (s *Sidecar) revoke(lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.requestTimeout)
	defer cancel()
	if _, err := s.co.Client().Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.o.log.Warn("cannot revoke the previous lease; it expires after its TTL", "lease", leaseHex(lease), "err", err)
	}
}
