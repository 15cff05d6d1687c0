package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// Nobody waits invisibly. A waiter in line has its queue key; a waiter
// held back off the line by its own tenant limit or instance selector (see
// queue.go) has none, so it keeps a record instead:
//
//	<root>/pools/<pool>/waiting/<lease>-<nonce>   waiting record JSON; its lease
//
// carrying its claim options and why it waits. The record is outside
// queue/, so no claim compares it, and the planner ignores it: it can
// change neither FIFO nor what is granted. It is bound to the waiter's
// lease, so it goes with a dead waiter, and a pool holds at most one per
// held-back claim. It is written when the waiter is held back, rewritten
// only when its reason changes (never on each change of the pool), deleted
// in the transaction that puts the waiter in line (enqueue) and written in
// the one that takes it out of line (stepOut), so a watcher sees one
// waiter-joined and one waiter-left per claim; the one written on a step
// out keeps the revision of the first (waitingRecord.First). The record is
// for operators, and a hint to the held-back waiters of other processes of
// who was held back first (heldback_peers.go), never a rule: a waiter that
// cannot write it (a role without write on waiting/) keeps waiting,
// unrecorded.

// WaitStatus says why a waiting claim has not been granted yet.
type WaitStatus struct {
	// Reason is why it waits; empty while a free seat is being granted.
	Reason WaitReason `json:"reason"`
	// Detail says it for people, e.g. `tenant "a" holds 1 of its limit 1`.
	Detail string `json:"detail,omitempty"`
	// Ahead is how many claimants stand ahead of it in line; 0 for the
	// head and for a waiter held back off the line.
	Ahead int `json:"ahead"`
	// InLine is true for a waiter in the queue, false for one held back
	// off it by its own tenant limit or instance selector.
	InLine bool `json:"inLine"`
}

// String says the status in one line: `tenant at limit: tenant "a" holds
// 1 of its limit 1`, `behind 2 others in line`.
func (w WaitStatus) String() string {
	switch {
	case w.Reason == WaitQueue && w.Ahead > 0:
		return fmt.Sprintf("behind %d %s in line", w.Ahead, plural(w.Ahead, "other", "others"))
	case w.Reason == "" && w.Detail == "":
		return "waiting"
	case w.Reason == "":
		return w.Detail
	case w.Detail == "":
		return w.Reason.Text()
	}
	return w.Reason.Text() + ": " + w.Detail
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// WithWaitStatus has a claim made WithWait call f with its WaitStatus
// whenever it changes: when it starts waiting, and when its reason or its
// place in line changes. f runs on the claiming goroutine, never under a
// lock of the Coordinator; it must return quickly. Default: none.
func WithWaitStatus(f func(WaitStatus)) ClaimOption {
	return func(o *claimOptions) { o.onWait = f }
}

// recordTimeout bounds a write of a waiting record; a write that fails is
// retried at the next change of the pool.
const recordTimeout = time.Second

// waitingRecord is the JSON value of a waiting key.
type waitingRecord struct {
	waiterRecord
	Reason WaitReason `json:"reason"`
	Detail string     `json:"detail,omitempty"`
	// First is the create revision of the waiter's first waiting record,
	// which the record written when it steps out of line keeps: its place
	// among the held-back waiters of other processes (heldback_peers.go).
	// 0 (left out): the record's own create revision.
	First int64 `json:"first,omitempty"`
}

// place returns the revision that orders the waiter of record rec at kv
// among held-back waiters: its first record's (First), or kv's own. A
// First after kv's creation cannot be a first record's, and is ignored.
func (rec waitingRecord) place(kv *mvccpb.KeyValue) int64 {
	if rec.First > 0 && rec.First < kv.CreateRevision {
		return rec.First
	}
	return kv.CreateRevision
}

// putWaiting records a waiting key in a state's map. A key without a
// lease was not written by a waiter of ours (it could never go away): it
// is left out, and, being outside queue/, blocks nothing.
func putWaiting(m map[string]*mvccpb.KeyValue, kv *mvccpb.KeyValue) {
	if kv.Lease == 0 {
		delete(m, string(kv.Key))
		return
	}
	m[string(kv.Key)] = kv
}

// denied returns the refusal of a claim that waiting cannot resolve: its
// tenant's limit is 0. The planner says it before anything else.
func (s *poolState) denied(o claimOptions) error {
	if limit, limited := s.spec.LimitFor(o.tenant); limited && limit == 0 {
		return &NoSeatError{Pool: s.pool, Reason: WaitTenantDenied,
			Detail: fmt.Sprintf("tenant %q is denied in pool %q: its limit is 0", o.tenant, s.pool)}
	}
	return nil
}

// ownBar returns what bars a claim with options o by its own tenant and
// instance selector now, as the planner's tenant and instance steps say
// it (a NoSeatError, or ErrInstanceNotFound), or nil. It ignores the
// queue and the pool's capacity. When every instance is full it returns
// that (instances_full), which bars every claim alike: not the claim's
// own (ownLimit), and ownFits does not count it.
func (s *poolState) ownBar(o claimOptions) error {
	if s.specKV == nil || s.specErr != nil {
		return nil
	}
	if err := s.denied(o); err != nil {
		return err
	}
	req, scratch := claimRequest{opts: o}, &claimPlan{}
	if err := s.planTenant(scratch, req); err != nil {
		return err
	}
	return s.planInstance(scratch, req)
}

// waitStatusOf turns a planner refusal into a WaitStatus.
func waitStatusOf(err error, o claimOptions) WaitStatus {
	var ns *NoSeatError
	switch {
	case errors.As(err, &ns):
		return WaitStatus{Reason: ns.Reason, Detail: ns.Detail}
	case errors.Is(err, ErrInstanceNotFound):
		return WaitStatus{Reason: WaitNoMatchingInstance, Detail: fmt.Sprintf("instance %q is not registered", o.instance)}
	case err == nil:
		return WaitStatus{Detail: "a seat is free: being granted"}
	}
	return WaitStatus{Detail: err.Error()}
}

// heldBackStatus is the status of a claim with options o that waits off
// the line: what its own constraints say. A claim with an instance
// selector is held back while no instance it selects has a free seat,
// whether or not the others have one (ownRoom), so that is its reason
// either way: were it instances_full while every instance is full, each
// held-back waiter would rewrite its waiting record each time some
// instance frees a seat and fills again.
func (s *poolState) heldBackStatus(o claimOptions) WaitStatus {
	if err := s.ownBar(o); ownLimit(err) {
		return waitStatusOf(err, o)
	}
	return WaitStatus{Reason: WaitNoMatchingInstance, Detail: fmt.Sprintf("no ready instance with a free seat matches in pool %q", s.pool)}
}

// queuedStatus is the status of the queued claim req with ahead waiters in
// front of it: the head says what the planner refuses it; a waiter behind
// says what bars it on its own (the head passes it over), or else how many
// stand ahead.
func (s *poolState) queuedStatus(req claimRequest, ahead int) WaitStatus {
	if ahead == 0 {
		_, err := s.plan(req)
		st := waitStatusOf(err, req.opts)
		st.InLine = true
		return st
	}
	if req.opts.constrained() {
		if err := s.ownBar(req.opts); ownLimit(err) {
			st := waitStatusOf(err, req.opts)
			st.Ahead, st.InLine = ahead, true
			return st
		}
	}
	return WaitStatus{Reason: WaitQueue, Detail: fmt.Sprintf("%d ahead in line", ahead), Ahead: ahead, InLine: true}
}

// waitTracker follows one waiting claim: it reports its status to the
// caller's hook and to the metrics, and keeps its waiting record. It is
// used by the claiming goroutine only.
type waitTracker struct {
	c       *Coordinator
	s       *Session
	pool    string
	o       claimOptions
	lease   clientv3.LeaseID
	key     string // the waiting key; one per claim, whatever its queue nonces
	spoil   func() // marks the claim's name not reusable (names.go)
	since   time.Time
	cur     WaitStatus
	has     bool       // cur was set
	counted WaitReason // the reason the metrics count this claim under
	// written is the reason in the waiting key, "" when none is known to
	// be there; maybe says one may be there (a write was attempted).
	written  WaitReason
	maybe    bool
	lost     bool  // a write's answer was lost: it may have landed
	disabled bool  // etcd refused the write: wait unrecorded
	first    int64 // the create revision of its first record, once known
}

func (c *Coordinator) newWaitTracker(s *Session, pool string, req claimRequest) *waitTracker {
	return &waitTracker{c: c, s: s, pool: pool, o: req.opts, lease: req.lease,
		key: c.k.waitingKey(pool, req.lease, req.nonce), spoil: req.spoil, since: time.Now().UTC()}
}

// set records st as the claim's status and reports it if it changed.
func (w *waitTracker) set(st WaitStatus) {
	if w.has && st == w.cur {
		return
	}
	w.cur, w.has = st, true
	w.count(st.Reason)
	if w.o.onWait != nil {
		w.o.onWait(st)
	}
}

// count moves the claim to reason r in the metrics ("" counts nowhere).
func (w *waitTracker) count(r WaitReason) {
	if r == w.counted {
		return
	}
	if w.counted != "" {
		w.c.metrics.Waiting(w.pool, string(w.counted), -1)
	}
	if r != "" {
		w.c.metrics.Waiting(w.pool, string(r), 1)
	}
	w.counted = r
}

// value is the waiting record of the current status.
func (w *waitTracker) value() string {
	o := w.o
	b, _ := json.Marshal(waitingRecord{
		waiterRecord: waiterRecord{Holder: o.holder, Tenant: o.tenant, Instance: o.instance, Labels: o.labels, Since: w.since},
		Reason:       w.cur.Reason, Detail: w.cur.Detail, First: w.first,
	})
	return string(b)
}

// heldBack records that the claim waits off the line with status st, and
// writes its waiting record if the reason is not the one recorded.
func (w *waitTracker) heldBack(ctx context.Context, st WaitStatus) {
	w.set(st)
	if w.disabled || (w.written == st.Reason && w.maybe) {
		return
	}
	w.maybe = true // a failed put may still land
	// Bounded: the record is for operators, and a waiter blocked on it
	// (an election) would not see its constraints admit it meanwhile.
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithLease(w.lease)}
	if w.first == 0 {
		opts = append(opts, clientv3.WithPrevKV()) // a lost put may have created it
	}
	resp, err := w.c.cli.Put(ctx, w.key, w.value(), opts...)
	if err != nil {
		w.refused(err)
		return
	}
	w.written = st.Reason
	if w.first == 0 {
		// The put created the record, or one whose answer was lost did.
		w.first = resp.Header.Revision
		if resp.PrevKv != nil {
			w.first = resp.PrevKv.CreateRevision
		}
	}
}

// waitTurn records that the claim, which its own constraints admit, waits
// off the line while earlier waiters of its class go first (heldback.go):
// heldBackTurnStatus, which Queue shows for it too. A claim whose record is
// known to be written keeps it as it is: Queue reads the record's reason
// only while the claim's constraints bar it, and rewriting the record of
// every held-back waiter of a tenant at each of its releases would cost a
// write per waiter. A claim with none known gets one, so that it is not
// invisible meanwhile.
func (w *waitTracker) waitTurn(ctx context.Context) {
	if w.written != "" {
		w.set(heldBackTurnStatus)
		return
	}
	w.heldBack(ctx, heldBackTurnStatus)
}

// refused notes a failed write of the waiting record: a permanent
// refusal stops the writes of this claim; anything else is retried at the
// next change.
func (w *waitTracker) refused(err error) {
	if etcdclient.IsPermanent(err) {
		// Refused, so not written; a record is there only if an earlier
		// write was, or may have been.
		w.disabled, w.maybe = true, w.written != "" || w.lost
		w.c.log.Warn("cannot record a held-back waiter; it waits unrecorded", "pool", w.pool, "key", w.key, "err", err)
		return
	}
	w.lost = true
	w.spoil() // the failed write may still land, after the record's delete
	w.c.log.Debug("record held-back waiter", "pool", w.pool, "key", w.key, "err", err)
}

// enqueueOps are the ops the enqueue txn adds: the waiting record's
// delete, so that the waiter moves into line in one revision. None once
// etcd refused the record's writes: the delete would be refused too, and
// with it the enqueue (TestUnrecordedWaiterJoins); a record an earlier
// write may have left goes with the lease.
func (w *waitTracker) enqueueOps() []clientv3.Op {
	if !w.maybe || w.disabled {
		return nil
	}
	return []clientv3.Op{clientv3.OpDelete(w.key)}
}

// inLine notes that the enqueue txn committed: the record is gone.
func (w *waitTracker) inLine() { w.written, w.maybe, w.lost = "", false, false }

// stepOut takes a head barred by its own constraints out of line and
// records it as held back, in one txn that does so only if no seat was
// granted to it meanwhile and, by proof (barProof), what barred it still
// does; and reports whether it did. When the txn applied nothing, again
// says so: a release or a head granted the waiter a seat after the look
// that barred it, or the bar lifted (its tenant's seat released, say), and
// the caller looks again, first in line still. On an error it reports
// neither: the caller then dequeues as for any waiter that leaves. Before
// 2026-12-05 the step-out compared the queue key alone: a head whose bar
// lifted while its step-out was on the way went to the back, and the
// waiters behind it took the seats (TestStepOutAfterBarLiftedStaysFirst).
//
// A waiter whose records etcd refuses (a role without write on waiting/)
// steps out unrecorded: the txn only deletes its queue key; a full txn
// refused for that reason is sent again so (TestUnrecordedHeadGrantedKeepsSeat).
// A proof etcd refuses as too many operations (its --max-txn-ops set below
// the default) is dropped: the step-out is sent again unproven.
func (c *Coordinator) stepOut(ctx context.Context, req claimRequest, proof []clientv3.Cmp, w *waitTracker) (stepped, again bool) {
	for {
		record := !w.disabled
		// A grant deletes the queue key: while it is there, none was made.
		ops := []clientv3.Op{clientv3.OpDelete(req.queueKey)}
		if record {
			w.maybe = true
			ops = append(ops, clientv3.OpPut(w.key, w.value(), clientv3.WithLease(req.lease)))
		}
		cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(req.queueKey), "=", req.queueRev)}, proof...)
		resp, err := c.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		switch {
		case err != nil && proof != nil && errors.Is(err, rpctypes.ErrTooManyOps):
			proof = nil
			continue
		case err != nil && record && etcdclient.IsPermanent(err):
			w.refused(err) // once more, unrecorded
			continue
		case err != nil:
			if record {
				w.refused(err)
			}
			return false, false
		case !resp.Succeeded:
			w.maybe = w.lost // nothing written: enqueue deleted any record before
			return false, true
		}
		if record {
			w.written = w.cur.Reason
			if w.first == 0 { // its put created the record: enqueue deleted any before
				w.first = resp.Header.Revision
			}
		}
		return true, false
	}
}

// end stops reporting the claim and deletes its waiting record if one may
// exist. If etcd cannot be reached now, the delete continues in the
// background (cleanUp): until the session ends, or for a borrowed session
// until it passes, since its lease may outlive the session here
// (TestBorrowedWaitingRecordRemoved).
func (w *waitTracker) end() {
	w.count("")
	if w.maybe && w.disabled {
		w.spoil() // a record an earlier write may have left outlives the claim: etcd refuses its delete
	}
	if !w.maybe || w.disabled || w.gone() {
		return // nothing written, or it goes with the lease
	}
	if w.s.live() {
		cctx, cancelCleanup := context.WithTimeout(context.Background(), w.c.opts.timeout)
		defer cancelCleanup()
		ctx, cancel := w.s.bind(cctx)
		defer cancel()
		if _, err := w.c.cli.Delete(ctx, w.key); err == nil || w.gone() {
			return
		}
	}
	w.spoil() // the record may outlive the claim
	w.c.goBackground(func(bctx context.Context) {
		w.c.cleanUp(bctx, w.s, w.pool, RetryWaiting, "a waiting record", func(ctx context.Context) error {
			_, err := w.c.cli.Delete(ctx, w.key)
			return err
		})
	})
}

// gone reports whether the record goes with the lease: the session ended,
// and is not borrowed (whose lease may outlive it).
func (w *waitTracker) gone() bool { return !w.s.live() && !w.s.Borrowed() }
