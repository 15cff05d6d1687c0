package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Grants by the head. When the head of the queue finds free seats, it does
// not take one and leave the rest idle until the next head has caught up:
// in the same transaction as its own claim it grants seats to the waiters
// behind it, in queue order, as many as the pool, their tenants and their
// instances admit (up to maxGrants). So k free seats are granted in one
// round trip, and a fairness rule costs no parallelism.
//
// Each grant is a nested txn whose compares re-check, on the server, what
// a claim of that waiter would: its queue key (so its lease is alive and it
// did not leave), its fence, and the chosen seat, tenant and instance slots.
// The grants nest in a chain, each in the Then of the one before it, so
// the server applies them in order up to the first whose compares fail,
// and none after it: a waiter whose grant fails (its fence moved, as when
// its session resolves an ambiguous claim txn, or its seat went to
// another) is never overtaken in that txn by the waiters behind it
// (TestBatchGrantsStopAtFirstRefused). Side by side, each grant applied or
// not on its own, and the FIFO checker of TestChaos caught a waiter
// granted ahead of an older one still waiting. A granted
// waiter's seat key is written under its lease and named after it, like
// every claim's (keys.go), and its queue key is deleted in the same txn:
// the waiter's feed wakes it on that delete, and it finds its seat by its
// own name (grantOf). There is no separate grant key.
//
// Order: the head plans for itself first, then for each waiter in arrival
// order, on an exact snapshot, marking what each plan takes. A waiter that
// its own tenant limit or instance selector bars is passed over (FIFO holds
// among waiters that can be served; the grants behind a waiter passed over
// at its tenant's limit prove on the server that it still is, passover.go);
// the first waiter refused for want of
// a seat ends the batch, and so does the first whose grant would take the
// chain past etcd's limit on operations (txnOps).

// maxGrants bounds the waiters granted in one transaction, keeping it far
// below etcd's 1.5 MiB request limit.
const maxGrants = 16

// maxTxnOps is etcd's default --max-txn-ops. etcd counts, for a txn, the
// largest of its compares, its Then and its Else, and a txn nested in
// another may count only what its parents leave (checkTxnRequest): so the
// counts along a chain of grants add up. A batch stops before a grant that
// would take them past this. A server set to a lower limit refuses the
// longer chains, having applied nothing: the head then claims alone, and
// the Coordinator chains fewer grants from then on (chainLimit), so only
// the first few heads pay for a refused txn.
const maxTxnOps = 128

// maxElseOps is the most a claim txn's Else reads (probeOps).
const maxElseOps = probeTenant + 1

// txnOps is what a txn of cmps and then counts against maxTxnOps, with an
// Else of at most maxElseOps: txnCount's rule, applied by grantBehind while
// it builds a chain, before the txn exists.
func txnOps(cmps, then int) int { return max(cmps, then, maxElseOps) }

// txnCount is what etcd counts against its --max-txn-ops for a txn of
// cmps, then and els (checkTxnRequest): the largest of the three, plus
// the most that any txn nested in its branches counts.
func txnCount(cmps []clientv3.Cmp, then, els []clientv3.Op) int {
	nested := 0
	for _, op := range append(then[:len(then):len(then)], els...) {
		if op.IsTxn() {
			nested = max(nested, txnCount(op.Txn()))
		}
	}
	return max(len(cmps), len(then), len(els)) + nested
}

// planBatch plans the head's claim and grants for the waiters behind it,
// within limit operations along the chain (chainLimit). It marks in s
// what the plans take, so s must be a private snapshot that the caller
// reloads when the txn fails.
func (s *poolState) planBatch(head claimRequest, limit int) (*claimPlan, error) {
	p, err := s.plan(head)
	if err != nil {
		return nil, err
	}
	s.grantBehind(p, limit)
	return p, nil
}

// grantBehind adds to p, the head's claim planned on s, the grants for the
// waiters behind it (planBatch), and sets p.chainOps.
func (s *poolState) grantBehind(p *claimPlan, limit int) {
	s.assume(p)
	var gs []*claimPlan
	var passed passedOver
	passed.took(p)
	left := limit - p.ownOps()
	for _, kv := range s.waiters() {
		if len(gs) == maxGrants {
			break
		}
		req, ok := s.waiterRequest(kv)
		if !ok {
			continue
		}
		g, err := s.plan(req)
		if ownLimit(err) {
			passed.pass(req.opts, err)
			continue
		}
		if err != nil {
			break
		}
		proof := passed.cmps(s) // passover.go
		cost := max(len(g.cmps)+len(proof), len(g.ops)+1)
		if cost > left {
			break // the next head grants it
		}
		g.cmps = append(g.cmps, proof...)
		passed.proven()
		left -= cost
		s.assume(g)
		passed.took(g)
		gs = append(gs, g)
	}
	p.grants, p.chainOps = chain(gs), limit-left
}

// ownOps is what the head's own claim counts along its chain of grants.
func (p *claimPlan) ownOps() int { return txnOps(len(p.cmps), len(p.ops)+1) } // +1: the chain

// chain nests the grants gs, in order, each in the Then of the one before
// it, and returns the outermost (nil for none).
func chain(gs []*claimPlan) []clientv3.Op {
	var next []clientv3.Op
	for i := len(gs) - 1; i >= 0; i-- {
		g := gs[i]
		next = []clientv3.Op{clientv3.OpTxn(g.cmps, append(g.ops[:len(g.ops):len(g.ops)], next...), nil)}
	}
	return next
}

// waiterRequest rebuilds the claim a queued waiter asked for from its key.
func (s *poolState) waiterRequest(kv *mvccpb.KeyValue) (claimRequest, bool) {
	pk, err := s.k.parse(string(kv.Key))
	if err != nil {
		return claimRequest{}, false
	}
	rec, err := decodeWaiterRecord(kv.Value)
	if err != nil {
		return claimRequest{}, false
	}
	o := claimOptions{holder: rec.Holder, tenant: rec.Tenant, instance: rec.Instance, labels: rec.Labels}
	if o.validate() != nil || clientv3.LeaseID(kv.Lease) != leaseOfHex(pk.Name) {
		return claimRequest{}, false // not written by a waiter of ours: never granted
	}
	return claimRequest{
		opts: o, lease: leaseOfHex(pk.Name), nonce: nonceOfHex(pk.Name),
		queueKey: string(kv.Key), queueRev: kv.CreateRevision, granted: true,
	}, true
}

// assume marks in s the keys a plan writes and deletes, as if its txn had
// committed, so that the next plan of a batch does not take the same slot.
func (s *poolState) assume(p *claimPlan) {
	for _, op := range p.ops {
		switch {
		case op.IsPut():
			s.put(&mvccpb.KeyValue{Key: op.KeyBytes(), Value: op.ValueBytes(),
				CreateRevision: s.rev + 1, ModRevision: s.rev + 1, Version: 1, Lease: int64(p.lease)})
		case op.IsDelete():
			s.del(string(op.KeyBytes()))
		}
	}
}

// grant is a seat held under a claim's name, as a view shows it: granted
// to a waiter, or taken by a claim whose answer was lost.
type grant struct {
	kv   *mvccpb.KeyValue // the seat key; its create revision is the token
	seat int
	rec  seatRecord
	err  error     // the seat's value does not decode
	inst *Instance // the bound instance; nil if none
}

// grantOf returns the seat held under the claim name name, with the
// lease that name carries, or nil. A waiter's name is its claim's, so in a
// view at or after its enqueue this is the seat granted to it: no earlier
// claim of that name has a key left (names.go).
func (s *poolState) grantOf(name string) *grant {
	n, ok := s.claimed[name]
	if !ok || s.seats[n].Lease != int64(leaseOfHex(name)) {
		return nil
	}
	g := &grant{kv: s.seats[n], seat: n}
	g.rec, g.err = decodeSeatRecord(g.kv.Value)
	// The key's name, not its value, says which keys are the claim's: a
	// value that does not decode must not leave the release of its seat
	// aiming at another key (TestGrantOfUndecodableSeatIsGivenUp).
	g.rec.Nonce = nonceOfHex(name)
	if g.err == nil && g.rec.Instance != "" {
		if in, ok := s.instances[g.rec.Instance]; ok {
			g.inst = &in
		} else {
			g.inst = &Instance{ID: g.rec.Instance} // deregistered since the grant; the monitor will see it
		}
	}
	return g
}

// fromGrant turns the seat granted to the waiter of req into its Claim. A
// seat whose value does not decode (not written by etcdpool) is released,
// fenced by its token, in the background: its keys may outlive the call,
// so the name is not reused (names.go).
func (c *Coordinator) fromGrant(s *Session, pool string, req claimRequest, g *grant) (*Claim, error) {
	cl := c.newClaim(s, pool, g.seat, g.kv.CreateRevision, g.rec, g.inst)
	if g.err != nil {
		req.spoil()
		return nil, c.giveUp(cl, fmt.Errorf("coordinator: seat %q granted to this waiter: %w", g.kv.Key, g.err), "", ReasonUnknown)
	}
	return c.keepIfLive(cl)
}

// dropWaiter removes a waiter that gave up: its queue key, and the seat if
// the head or a release granted it one meanwhile (released, fenced by its
// token). A grant deletes the queue key, so the pool's seats are read only
// when the key is gone: when a grant raced the give-up. req.queueRev must
// be the key's create revision.
func (c *Coordinator) dropWaiter(ctx context.Context, s *Session, pool string, req claimRequest) error {
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(req.queueKey), "=", req.queueRev)).
		Then(clientv3.OpDelete(req.queueKey)).Else(clientv3.OpGet(c.k.seats(pool), clientv3.WithPrefix())).Commit()
	if err != nil || resp.Succeeded {
		return err
	}
	st := newPoolState(c.k, pool)
	for _, kv := range rangeKvs(resp) {
		st.put(kv)
	}
	g := st.grantOf(queueName(req.lease, req.nonce))
	if g == nil {
		return nil // it went with its lease, or someone removed it
	}
	req.spoil() // a failed release below leaves the seat's keys
	cl := c.newClaim(s, pool, g.seat, g.kv.CreateRevision, g.rec, g.inst)
	if err := cl.Release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
		cl.lose(ErrClosed, "not taken") // unregisters it from the session
		return err
	}
	return nil
}

// chainLimit is the most operations a head's txn may count along its
// chain of grants: maxTxnOps, or less once etcd has refused a chain as too
// many operations (its --max-txn-ops set lower than ours). We are not told
// etcd's limit, so each refusal halves the grants' share of the refused
// count: a few refusals find a chain etcd takes, at the price of chaining
// up to half the grants it would take. It is lowered only by a chain that
// carried grants, so a head alone is never held back: with no room left,
// it grants none.
func (c *Coordinator) chainLimit() int {
	if n := c.txnLimit.Load(); n > 0 {
		return int(n)
	}
	return maxTxnOps
}

// refusedChain records that etcd refused a chain counting ops operations,
// own of them the head's, and reports whether that lowered chainLimit.
func (c *Coordinator) refusedChain(ops, own int) bool {
	if ops <= own {
		return false // no grants: nothing to halve
	}
	return lowerTo(&c.txnLimit, int64(own+(ops-own)/2))
}

// lowerTo stores v in a, a limit learned from etcd's refusals (0: none
// yet), unless a already holds v or less, and reports whether it stored.
func lowerTo(a *atomic.Int64, v int64) bool {
	for {
		cur := a.Load()
		if cur > 0 && cur <= v {
			return false
		}
		if a.CompareAndSwap(cur, v) {
			return true
		}
	}
}
