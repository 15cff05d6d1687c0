package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Claim is a held seat. Its token is the create revision of the seat key;
// every write made on the holder's behalf should be guarded by IsOwner.
//
// Done closes no later than the session's local deadline, whatever etcd
// does: the session ending closes it directly, not through the monitor.
type Claim struct {
	c     *Coordinator
	sess  *Session
	pool  string
	seat  int
	token int64
	claim string // <lease>-<nonce>: the last segment of its seat and slot keys
	rec   seatRecord
	inst  *Instance

	mu       sync.Mutex
	err      error         // why the seat was lost; nil while held
	donec    chan struct{} // closed when err is set
	monOnce  sync.Once
	stopMon  context.CancelFunc
	stopSess func() bool   // unregisters the session-end callback
	feed     *poolFeed     // the pool feed it keeps running while it holds (feed.go), or nil
	releases int           // Release calls running
	relEnded chan struct{} // closed when the running Release calls have all ended

	drainc    chan struct{} // closed once the bound instance is seen draining (draining.go)
	drainOnce sync.Once
	drainOn   bool          // the bound instance drains, as last seen; under mu
	drainMove chan struct{} // closed when drainOn changes, then replaced; under mu
	freedc    chan struct{} // closed once a Release of this claim freed the seat
	freedOnce sync.Once

	reusable atomic.Bool // its name may be reused once released (names.go)
}

func (c *Coordinator) newClaim(s *Session, pool string, seat int, token int64, rec seatRecord, inst *Instance) *Claim {
	cl := &Claim{c: c, sess: s, pool: pool, seat: seat, token: token, claim: queueName(s.Lease(), rec.Nonce), rec: rec, inst: inst,
		donec: make(chan struct{}), drainc: make(chan struct{}), drainMove: make(chan struct{}), freedc: make(chan struct{})}
	cl.mu.Lock()
	cl.stopSess = context.AfterFunc(s.life, cl.sessionEnded)
	cl.mu.Unlock()
	return cl
}

// sessionEnded ends the claim with its session. A session its owner
// closed (Session.Close revokes the lease, which frees the seat; a borrowed
// session's Close only stops following it) is not a loss: Err says
// ErrClosed, and no SeatLost is counted. Else the session expired, or was
// lost, and Err says so.
func (cl *Claim) sessionEnded() {
	if errors.Is(cl.sess.Err(), ErrClosed) {
		cl.lose(ErrClosed, "its session was closed")
		return
	}
	cl.lose(cl.sess.lostErr(), "")
}

// Pool returns the pool name.
func (cl *Claim) Pool() string { return cl.pool }

// Seat returns the seat number, 0..capacity-1 at the time of the grant.
func (cl *Claim) Seat() int { return cl.seat }

// Token returns the fencing token: the create revision of the seat key. It
// only grows for a given seat, so a downstream service can reject any token
// older than the newest it has seen for that seat.
func (cl *Claim) Token() int64 { return cl.token }

// Holder returns the holder identity.
func (cl *Claim) Holder() string { return cl.rec.Holder }

// Tenant returns the tenant the seat is charged to, or "".
func (cl *Claim) Tenant() string { return cl.rec.Tenant }

// Lease returns the session lease the seat is bound to.
func (cl *Claim) Lease() clientv3.LeaseID { return cl.sess.Lease() }

// Instance returns the instance the seat is bound to, as registered when
// the seat was granted, and false for an anonymous seat.
func (cl *Claim) Instance() (Instance, bool) {
	if cl.inst == nil {
		return Instance{}, false
	}
	return *cl.inst, true
}

// IsOwner returns a compare that holds while this claim holds its seat. Put
// it in your own transactions to fence writes made on the holder's behalf.
func (cl *Claim) IsOwner() clientv3.Cmp { return cl.held().owner(cl.c.k) }

// key returns the claim's seat key.
func (cl *Claim) key() string { return cl.c.k.seat(cl.pool, cl.seat, cl.claim) }

// Done returns a channel that is closed when the seat is lost for any
// reason: released, lease expired or presumed expired by the session's local
// deadline, force-released, instance gone, pool deleted. The first call
// starts a monitor (two watches); a claim nobody watches costs nothing, but
// then nothing frees its seat early when its instance goes away: the seat
// counts against capacity until it is released or its lease ends. When
// the instance goes, Done closes at once, and the seat (with the
// instance's slot, which keeps others from binding the instance should it
// be registered again) stays held until the holder releases it or the
// hold passes (WithInstanceGoneHold).
// Done closing is advice, not a fence: a holder that is paused may act after
// it closes. Use IsOwner for the writes that must not happen then.
func (cl *Claim) Done() <-chan struct{} {
	cl.monOnce.Do(cl.startMonitor)
	return cl.donec
}

// Err returns nil while the seat is held, and after Done closes the reason:
// ErrReleased, ErrSessionExpired, ErrForceReleased (with the operator's
// reason), ErrInstanceGone, ErrPoolDeleted, ErrSeatLost, or ErrClosed when
// the Coordinator was closed (the seat may still be held).
func (cl *Claim) Err() error {
	cl.monOnce.Do(cl.startMonitor)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.err
}

func (cl *Claim) lost() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.err != nil
}

// lose records the first loss reason and closes Done.
func (cl *Claim) lose(err error, detail string) {
	var fd *poolFeed
	defer func() {
		if fd != nil { // after cl.mu: releaseFeed takes the Coordinator's lock
			cl.c.releaseFeed(cl.pool, fd)
		}
	}()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.err != nil {
		return
	}
	fd, cl.feed = cl.feed, nil
	if detail != "" {
		err = fmt.Errorf("%w: %s", err, detail)
	}
	cl.err = err
	if !errors.Is(err, ErrClosed) { // ErrClosed: not taken, or no longer watched
		cl.c.metrics.SeatHold(cl.pool, time.Since(cl.rec.ClaimedAt))
	}
	// Count before closing Done, so that whoever wakes on Done sees it.
	if !errors.Is(err, ErrReleased) && !errors.Is(err, ErrClosed) {
		cl.c.metrics.SeatLost(cl.pool, reasonOf(err))
		cl.c.log.Warn("seat lost", "pool", cl.pool, "seat", cl.seat, "token", cl.token, "err", err)
	}
	close(cl.donec)
	if cl.stopMon != nil {
		cl.stopMon()
	}
	if cl.stopSess != nil {
		cl.stopSess()
	}
}

// startMonitor watches the seat key, the bound instance's key and the
// session, from the grant's revision so that nothing in between is missed.
func (cl *Claim) startMonitor() {
	cl.mu.Lock()
	if cl.err != nil {
		cl.mu.Unlock()
		return
	}
	// Bound to the session as well: a watch or read stuck on an unreachable
	// etcd must not outlive it.
	ctx, cancel := cl.sess.bind(cl.c.ctx)
	cl.stopMon = cancel
	cl.mu.Unlock()
	if !cl.c.goBackground(func(context.Context) { cl.monitor(ctx) }) {
		cl.lose(ErrClosed, "coordinator closed; the seat is no longer watched")
	}
}

func (cl *Claim) monitor(ctx context.Context) {
	c := cl.c
	seatKey := cl.key()
	wctx := clientv3.WithRequireLeader(ctx)
	seatW := c.cli.Watch(wctx, seatKey, clientv3.WithRev(cl.token))
	var instW clientv3.WatchChan
	if cl.rec.Instance != "" {
		instW = c.cli.Watch(wctx, c.k.instance(cl.pool, cl.rec.Instance), clientv3.WithRev(cl.token))
	}
	for {
		select {
		case <-ctx.Done():
			cl.unwatched()
			return
		case wr, ok := <-seatW:
			lost, resume := cl.seatEvent(ctx, wr, ok)
			if lost || ctx.Err() != nil || cl.lost() {
				cl.unwatched() // if it stopped because the Coordinator closed
				return
			}
			if resume > 0 {
				seatW = c.cli.Watch(wctx, seatKey, clientv3.WithRev(resume))
			}
		case wr, ok := <-instW:
			lost, resume := cl.instanceEvent(ctx, wr, ok)
			if lost || ctx.Err() != nil || cl.lost() {
				cl.unwatched()
				return
			}
			if resume > 0 {
				instW = c.cli.Watch(wctx, c.k.instance(cl.pool, cl.rec.Instance), clientv3.WithRev(resume))
			}
		}
	}
}

// seatEvent handles one watch response on the seat key and reports whether
// the seat is lost. When the watch broke (compaction, lost leader, closed
// channel) it re-reads the key and returns the revision to watch from.
func (cl *Claim) seatEvent(ctx context.Context, wr clientv3.WatchResponse, ok bool) (lost bool, resume int64) {
	for _, ev := range wr.Events {
		switch {
		case ev.Type == clientv3.EventTypeDelete:
			cl.seatGone(ctx, ev.Kv.ModRevision)
			return true, 0
		case ev.Kv.CreateRevision != cl.token:
			cl.seatGone(ctx, 0)
			return true, 0
		}
	}
	if ok && wr.Err() == nil {
		return false, 0
	}
	kv, rev := cl.reread(ctx, cl.key())
	if rev > 0 && (kv == nil || kv.CreateRevision != cl.token) {
		cl.seatGone(ctx, 0)
		return true, 0
	}
	return false, rev + 1
}

// seatGone ends the claim whose seat key the monitor found gone or
// replaced. While this process releases the seat, the release ends the
// claim itself, knowing why (release.go): the monitor waits for it rather
// than send a txn to ask etcd, for up to releaseAnswerWait, and asks only
// if the release has not ended the claim by then. A release whose txn
// committed but whose answer is lost can retry for as long as its ctx
// lets it; the claim's Done must not wait for that, since the seat is
// gone and may be granted again. So Done closes within releaseAnswerWait
// and a read of etcd of the seat key's delete, or at the session's
// deadline if etcd stops answering. del is the revision that deleted the
// seat key, when the monitor saw it (0: not known; see endRecord).
func (cl *Claim) seatGone(ctx context.Context, del int64) {
	if cl.lost() {
		return
	}
	if !cl.awaitRelease(ctx) {
		return
	}
	cl.classify(ctx, del)
}

// awaitRelease waits, while a Release of this process runs, for it to end
// the claim (it knows why the seat went), for up to releaseAnswerWait
// (seatGone). It reports whether the caller is to find out why itself:
// false once the claim has ended, or ctx has (lose stops the monitor; or
// the Coordinator closed, and the claim ends with ErrClosed).
func (cl *Claim) awaitRelease(ctx context.Context) bool {
	ended := cl.releaseEnded()
	if ended == nil {
		return true
	}
	cl.c.log.Debug("seat or instance key gone while this process releases the seat; the release gives the reason", "pool", cl.pool, "seat", cl.seat, "token", cl.token)
	wait := time.NewTimer(releaseAnswerWait)
	defer wait.Stop()
	select {
	case <-ended:
	case <-wait.C: // the release's answer is late, or lost: ask etcd
	case <-ctx.Done():
		cl.unwatched()
		return false
	}
	return !cl.lost()
}

// releaseAnswerWait is how long the monitor waits for a Release of this
// process to give the reason its seat key went (seatGone). etcd sends the
// release txn's answer and the key's delete event from the same apply, so
// the answer comes a moment after the event; one that does not come
// within this is late or lost.
const releaseAnswerWait = 250 * time.Millisecond

// unwatched ends the claim with ErrClosed when the monitor stopped because
// its Coordinator closed: nothing watches the seat any more. Otherwise the
// monitor stopped because the claim ended (lose, or the session's end,
// which calls it), and there is nothing to do.
func (cl *Claim) unwatched() {
	if cl.c.ctx.Err() != nil {
		cl.lose(ErrClosed, "coordinator closed; the seat is no longer watched")
	}
}

// startRelease marks a Release call as running until the returned func is
// called.
func (cl *Claim) startRelease() (end func()) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.releases == 0 {
		cl.relEnded = make(chan struct{})
	}
	cl.releases++
	return func() {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if cl.releases--; cl.releases == 0 {
			close(cl.relEnded)
		}
	}
}

// releaseEnded returns a channel closed when the Release calls running now
// have ended, or nil when none runs.
func (cl *Claim) releaseEnded() <-chan struct{} {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.releases == 0 {
		return nil
	}
	return cl.relEnded
}

// instanceEvent is seatEvent for the bound instance's key.
func (cl *Claim) instanceEvent(ctx context.Context, wr clientv3.WatchResponse, ok bool) (lost bool, resume int64) {
	for _, ev := range wr.Events {
		if ev.Type == clientv3.EventTypeDelete || cl.otherIncarnation(ev.Kv) {
			cl.instanceGone(ctx)
			return true, 0
		}
	}
	if n := len(wr.Events); n > 0 {
		cl.instanceState(wr.Events[n-1].Kv.Value) // the key as of the response (instanceState)
	}
	if ok && wr.Err() == nil {
		return false, 0
	}
	kv, rev := cl.reread(ctx, cl.c.k.instance(cl.pool, cl.rec.Instance))
	if rev > 0 && (kv == nil || cl.otherIncarnation(kv)) {
		cl.instanceGone(ctx)
		return true, 0
	}
	if kv != nil {
		cl.instanceState(kv.Value)
	}
	return false, rev + 1
}

// otherIncarnation reports whether kv, the bound instance's key, was
// created after the grant: the instance was deregistered and registered
// again since, so the seat's instance is gone, as releaseOps records it.
// The grant's txn proved the instance's key there, so its own
// incarnation was created before the token. A watch that replays from
// the grant shows the delete first; one resumed after a break, from a
// read, does not (the history between may be compacted), and this is how
// the monitor tells (TestReregisteredInstanceGoneAfterCompaction).
func (cl *Claim) otherIncarnation(kv *mvccpb.KeyValue) bool { return kv.CreateRevision > cl.token }

// reread gets one key, retrying until it succeeds or ctx ends (rev 0).
func (cl *Claim) reread(ctx context.Context, key string) (*mvccpb.KeyValue, int64) {
	for {
		resp, err := cl.c.cli.Get(ctx, key)
		if err == nil {
			if len(resp.Kvs) == 0 {
				return nil, resp.Header.Revision
			}
			return resp.Kvs[0], resp.Header.Revision
		}
		select {
		case <-ctx.Done():
			return nil, 0
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// classify finds out why the seat key went away. del is the revision that
// deleted it, or 0 if not known (endRecord).
func (cl *Claim) classify(ctx context.Context, del int64) {
	c := cl.c
	ops := []clientv3.Op{clientv3.OpGet(c.k.released(cl.pool, cl.seat)), clientv3.OpGet(c.k.spec(cl.pool))}
	if cl.rec.Instance != "" {
		ops = append(ops, clientv3.OpGet(c.k.instance(cl.pool, cl.rec.Instance)))
	}
	resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
	switch {
	case err != nil && !cl.sess.live():
		cl.sessionEnded()
		return
	case err != nil && c.ctx.Err() != nil:
		cl.unwatched() // cut off by Close: no verdict
		return
	case err != nil:
		cl.lose(ErrSeatLost, err.Error())
		return
	}
	get := func(i int) []byte {
		if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
			return kvs[0].Value
		}
		return nil
	}
	rel, ours := cl.releaseIn(get(0))
	if !ours {
		rel, ours = cl.endRecord(ctx, del) // a later release of the seat number may have overwritten ours
	}
	if ours {
		cl.releasedBy(rel)
		return
	}
	switch {
	case get(1) == nil:
		cl.lose(ErrPoolDeleted, cl.pool)
	case cl.rec.Instance != "" && get(2) == nil:
		// The seat went with the instance, or with the holder's lease
		// when the instance went too (both ended): the lease tells.
		if v := cl.leaseVerdict(ctx); !errors.Is(v, ErrSeatLost) {
			cl.lose(v, "")
			return
		}
		cl.lose(ErrInstanceGone, cl.rec.Instance)
	default:
		if v := cl.leaseVerdict(ctx); !errors.Is(v, ErrSeatLost) || c.ctx.Err() == nil {
			cl.lose(v, "")
			return
		}
		cl.unwatched() // the lease's read cut off by Close: no verdict
	}
}

// leaseVerdict tells an expired lease from a seat deleted by hand.
func (cl *Claim) leaseVerdict(ctx context.Context) error {
	ttl, err := cl.c.cli.TimeToLive(ctx, cl.sess.Lease())
	if !cl.sess.live() {
		return cl.sess.lostErr()
	}
	if err == nil && ttl.TTL <= 0 {
		return ErrSessionExpired
	}
	return ErrSeatLost
}

// instanceGone ends a claim whose instance left, and then frees its seat
// so that it does not count against the pool for ever if the holder does
// not release it. A release of this process running meanwhile gives the
// reason instead (the seat went first), as when the seat key goes
// (awaitRelease). A pool deleted with its instances deletes the instance
// and the seat in one txn, and the monitor may see either first: the spec,
// read before the verdict, tells (TestPoolDeletedBoundClaimSaysSo). Until
// this claim's own release below, its seat stays held, so the read delays
// no one's grant.
//
// The seat is freed only after the hold (WithInstanceGoneHold), not as
// Done closes: its instance slot, held with it, is what keeps another
// claim from binding the instance if its agent registers it again, and
// the holder needs time to stop using the worker once told
// (TestGoneInstanceNotReboundWithinHold; before 2026-12-05 a review bound
// it again 39 ms after the first holder's Done closed).
func (cl *Claim) instanceGone(mctx context.Context) {
	if !cl.awaitRelease(mctx) {
		return
	}
	poolGone, seatGone := cl.afterInstance()
	switch {
	case poolGone:
		cl.lose(ErrPoolDeleted, cl.pool)
		return
	case seatGone:
		// Gone in the same revision as the instance (one lease bound
		// both, or both ended): the seat's own end says why, and there is
		// no seat left to hold.
		cl.classify(mctx, 0)
		return
	}
	cl.lose(ErrInstanceGone, cl.rec.Instance)
	if !cl.holdGone() {
		return
	}
	ctx, cancel := cl.c.cleanupCtx()
	defer cancel()
	ops := cl.c.releaseOps(cl.held(), releaseRecord{Reason: ReasonInstanceGone, By: cl.rec.Holder, At: time.Now().UTC()})
	if _, err := cl.c.cli.Txn(ctx).If(cl.IsOwner()).Then(ops...).Commit(); err != nil {
		cl.c.log.Warn("free seat of gone instance", "pool", cl.pool, "seat", cl.seat, "err", err)
	}
}

// afterInstance reads, once the claim's instance went, the pool's spec and
// the claim's seat key in one txn: whether the pool is gone, and whether
// the seat is (its key gone or another's). Both false when etcd does not
// answer: the seat is then taken as held, which the hold keeps safe.
func (cl *Claim) afterInstance() (poolGone, seatGone bool) {
	ctx, cancel := cl.c.cleanupCtx()
	defer cancel()
	resp, err := cl.c.cli.Txn(ctx).Then(clientv3.OpGet(cl.c.k.spec(cl.pool)), clientv3.OpGet(cl.key())).Commit()
	if err != nil {
		return false, false
	}
	seat := resp.Responses[1].GetResponseRange().Kvs
	return len(resp.Responses[0].GetResponseRange().Kvs) == 0, len(seat) == 0 || seat[0].CreateRevision != cl.token
}

// holdGone waits out the hold of a claim whose instance went
// (instanceGone) and reports whether its seat is still to be freed: not
// when the hold is negative, nor when a Release of the holder has freed
// it, the session has ended (its end frees the seat), or the Coordinator
// has closed (after Close nothing of this process frees seats). A
// borrowed session (the HTTP API's) is followed, not kept: its Close says
// nothing of the lease, which its client may keep alive, so the hold runs
// on past it and the fenced txn after it frees the seat if the lease still
// holds it.
func (cl *Claim) holdGone() bool {
	d := cl.c.opts.goneHold
	switch {
	case d < 0:
		return false
	case d == 0:
		d = cl.sess.TTL()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return cl.sess.live() || cl.sess.Borrowed()
	case <-cl.sess.leaseDone():
	case <-cl.freedc:
	case <-cl.c.ctx.Done():
	}
	return false
}
