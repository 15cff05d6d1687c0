package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
// A nested grant whose compares fail is simply not applied. A granted
// waiter's queue key is deleted, and a grant key named after it is written
// under its lease, with the seat; the waiter watches that one key.
//
// Order: the head plans for itself first, then for each waiter in arrival
// order, on an exact snapshot, marking what each plan takes. A waiter that
// its own tenant limit or instance selector bars is passed over (FIFO holds
// among waiters that can be served); the first waiter refused for want of
// a seat ends the batch.

// maxGrants bounds the waiters granted in one transaction, keeping it far
// below etcd's --max-txn-ops (128 by default) and 1.5 MiB request limits.
const maxGrants = 16

// planBatch plans the head's claim and grants for the waiters behind it.
// It marks in s what the plans take, so s must be a private snapshot that
// the caller reloads when the txn fails.
func (s *poolState) planBatch(head claimRequest) (*claimPlan, error) {
	p, err := s.plan(head)
	if err != nil {
		return nil, err
	}
	s.assume(p)
	for _, kv := range s.waiters() {
		if len(p.grants) == maxGrants {
			break
		}
		req, ok := s.waiterRequest(kv)
		if !ok {
			continue
		}
		g, err := s.plan(req)
		if ownLimit(err) {
			continue
		}
		if err != nil {
			break
		}
		s.assume(g)
		p.grants = append(p.grants, clientv3.OpTxn(g.cmps, g.ops, nil))
	}
	return p, nil
}

// waiterRequest rebuilds the claim a queued waiter asked for from its key.
func (s *poolState) waiterRequest(kv *mvccpb.KeyValue) (claimRequest, bool) {
	pk, err := s.k.parse(string(kv.Key))
	var rec waiterRecord
	if err != nil || json.Unmarshal(kv.Value, &rec) != nil {
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

// holdsGrant reports whether the seat a grant key names is still held
// under the grant's token in this exact snapshot.
func (s *poolState) holdsGrant(kv *mvccpb.KeyValue) bool {
	var g grantRecord
	if json.Unmarshal(kv.Value, &g) != nil {
		return false
	}
	seat := s.seats[g.Seat]
	return seat != nil && seat.CreateRevision == kv.CreateRevision
}

// fromGrant turns a grant key written for this waiter into its Claim.
func (c *Coordinator) fromGrant(s *Session, pool string, kv *mvccpb.KeyValue) (*Claim, error) {
	var g grantRecord
	if err := json.Unmarshal(kv.Value, &g); err != nil {
		return nil, fmt.Errorf("coordinator: grant %q: %w", kv.Key, err)
	}
	return c.keepIfLive(c.newClaim(s, pool, g.Seat, kv.CreateRevision, g.Record, g.Instance))
}

// dropWaiter removes a waiter that gave up: its queue key, and the seat if
// the head granted it one meanwhile (released, fenced by its token).
func (c *Coordinator) dropWaiter(ctx context.Context, s *Session, pool string, req claimRequest) error {
	gkey := c.k.grant(pool, queueName(req.lease, req.nonce))
	resp, err := c.cli.Txn(ctx).Then(clientv3.OpDelete(req.queueKey), clientv3.OpGet(gkey)).Commit()
	if err != nil {
		return err
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil
	}
	req.spoil() // the release below may leave the grant key (ErrNotHeld)
	var g grantRecord
	if json.Unmarshal(kvs[0].Value, &g) != nil {
		_, err := c.cli.Delete(ctx, gkey)
		return err
	}
	cl := c.newClaim(s, pool, g.Seat, kvs[0].CreateRevision, g.Record, g.Instance)
	if err := cl.Release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
		cl.lose(ErrClosed, "not taken") // unregisters it from the session
		return err
	}
	return nil
}
