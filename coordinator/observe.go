package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Snapshot reads for operators. Each reads at one revision; lease TTLs are
// read right after, one request per distinct lease.

// seatOf decodes a seat key and value.
func (c *Coordinator) seatOf(pool string, kv *mvccpb.KeyValue) (Seat, bool) {
	pk, err := c.k.parse(string(kv.Key))
	if err != nil || pk.Seg != segSeats {
		return Seat{}, false
	}
	rec, err := decodeSeatRecord(kv.Value)
	if err != nil {
		return Seat{}, false
	}
	return Seat{
		Pool: pool, Seat: pk.Slot, Holder: rec.Holder, Tenant: rec.Tenant, Instance: rec.Instance,
		Token: kv.CreateRevision, Lease: clientv3.LeaseID(kv.Lease), ClaimedAt: rec.ClaimedAt, TTL: -1,
		tenantSlot: rec.TenantSlot, bindSlot: rec.BindSlot, claim: pk.Claim,
	}, true
}

// readPool reads a pool's whole state; ErrPoolNotFound without a spec.
func (c *Coordinator) readPool(ctx context.Context, pool string) (*poolState, error) {
	if err := ValidateName(pool); err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	resp, err := c.getPool(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("coordinator: read pool %q: %w", pool, err)
	}
	st := newPoolState(c.k, pool)
	st.load(resp.Header.Revision, resp.Kvs)
	if st.specKV == nil {
		return nil, fmt.Errorf("%w: %q", ErrPoolNotFound, pool)
	}
	return st, nil
}

// MaxTTLLookups bounds the lease TTL requests one Seats call makes: the
// seats of the first MaxTTLLookups distinct leases, in seat order, get
// their TTL left; the others report TTL -1 (unknown). etcd has no batch
// TTL request, so this keeps Seats on a pool of 10,000 holders at one read
// plus a bounded number of small requests.
const MaxTTLLookups = 64

// ttlWorkers is how many TTL requests Seats has in flight at once.
const ttlWorkers = 8

// Seats lists a pool's held seats in seat order, with lease TTL left (see
// MaxTTLLookups).
func (c *Coordinator) Seats(ctx context.Context, pool string) ([]Seat, error) {
	st, err := c.readPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	var out []Seat
	var leases []clientv3.LeaseID
	seen := map[clientv3.LeaseID]bool{}
	for _, n := range sortedSlots(st.seats) {
		s, ok := c.seatOf(pool, st.seats[n])
		if !ok {
			continue
		}
		if !seen[s.Lease] && len(leases) < MaxTTLLookups {
			seen[s.Lease] = true
			leases = append(leases, s.Lease)
		}
		out = append(out, s)
	}
	ttls := c.leaseTTLs(ctx, leases)
	for i := range out {
		if ttl, ok := ttls[out[i].Lease]; ok {
			out[i].TTL = ttl
		}
	}
	return out, nil
}

// leaseTTLs asks for the TTL left of each lease, ttlWorkers at a time. A
// lease whose request fails is left out.
func (c *Coordinator) leaseTTLs(ctx context.Context, leases []clientv3.LeaseID) map[clientv3.LeaseID]time.Duration {
	var mu sync.Mutex
	out := map[clientv3.LeaseID]time.Duration{}
	work := make(chan clientv3.LeaseID)
	var wg sync.WaitGroup
	for range min(ttlWorkers, len(leases)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if r, err := c.cli.TimeToLive(ctx, id); err == nil && r.TTL >= 0 {
					mu.Lock()
					out[id] = time.Duration(r.TTL) * time.Second
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range leases {
		work <- id
	}
	close(work)
	wg.Wait()
	return out
}

func sortedSlots[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// Queue lists a pool's waiters: those in line in the order they will be
// served, then those held back off the line by their own tenant limit or
// instance selector (Position -1), oldest first; each with why it waits.
func (c *Coordinator) Queue(ctx context.Context, pool string) ([]Waiter, error) {
	st, err := c.readPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	return c.waitersOf(st), nil
}

func (c *Coordinator) waitersOf(st *poolState) []Waiter {
	var out []Waiter
	for _, kv := range st.waiters() {
		rec, _ := decodeWaiterRecord(kv.Value) // a bad value still occupies its place
		w := waiterOf(st.pool, len(out), rec, kv)
		ws := WaitStatus{Detail: "not a waiter record of etcdpool: the head passes it over"}
		if req, ok := st.waiterRequest(kv); ok {
			ws = st.queuedStatus(req, len(out))
		}
		w.Reason, w.Detail, w.Ahead = ws.Reason, ws.Detail, len(out)
		out = append(out, w)
	}
	return append(out, heldBackOf(st)...)
}

// heldBackOf lists the waiters held back off the line, oldest first: in
// the order of their first records (waitingRecord.place).
func heldBackOf(st *poolState) []Waiter {
	type held struct {
		kv  *mvccpb.KeyValue
		rec waitingRecord
		at  recordAt
	}
	hs := make([]held, 0, len(st.waiting))
	for _, kv := range st.waiting {
		h := held{kv: kv}
		_ = json.Unmarshal(kv.Value, &h.rec)
		h.at = recordOf(kv, h.rec)
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b held) int { return a.at.compare(b.at) })
	var out []Waiter
	for _, h := range hs {
		kv, rec := h.kv, h.rec
		w := waiterOf(st.pool, -1, rec.waiterRecord, kv)
		o := claimOptions{tenant: rec.Tenant, instance: rec.Instance, labels: rec.Labels}
		ws := heldBackTurnStatus // its turn, or about to join (heldback.go)
		if !st.ownFits(o) {
			ws = st.heldBackStatus(o)
		}
		w.Reason, w.Detail = ws.Reason, ws.Detail
		out = append(out, w)
	}
	return out
}

func waiterOf(pool string, pos int, rec waiterRecord, kv *mvccpb.KeyValue) Waiter {
	return Waiter{
		Pool: pool, Position: pos, Holder: rec.Holder, Tenant: rec.Tenant,
		Instance: rec.Instance, Labels: rec.Labels, Lease: clientv3.LeaseID(kv.Lease),
		Since: rec.Since, Revision: kv.CreateRevision,
	}
}

// Instances lists a pool's registered instances by ID.
func (c *Coordinator) Instances(ctx context.Context, pool string) ([]Instance, error) {
	st, err := c.readPool(ctx, pool)
	if err != nil {
		return nil, err
	}
	out := make([]Instance, 0, len(st.instances))
	for _, id := range sortedKeys(st.instances) {
		out = append(out, st.instances[id])
	}
	return out, nil
}

// PoolStatus summarises one pool.
func (c *Coordinator) PoolStatus(ctx context.Context, pool string) (PoolStatus, error) {
	st, err := c.readPool(ctx, pool)
	if err != nil {
		return PoolStatus{}, err
	}
	return statusOf(st), nil
}

func statusOf(st *poolState) PoolStatus {
	ps := PoolStatus{Name: st.pool, Spec: st.spec, Held: len(st.seats), Waiting: len(st.queue) + len(st.waiting), Instances: len(st.instances)}
	if st.specKV != nil {
		ps.Revision = st.specKV.ModRevision
	}
	if st.specErr != nil {
		ps.SpecError = st.specErr.Error()
	}
	ps.Free = max(ps.Spec.Capacity-ps.Held, 0)
	return ps
}

// ListPools summarises every pool, by name. A pool whose spec is malformed
// is listed with SpecError set rather than hidden.
func (c *Coordinator) ListPools(ctx context.Context) ([]PoolStatus, error) {
	resp, err := c.cli.Get(ctx, c.k.pools(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("coordinator: list pools: %w", err)
	}
	states := map[string]*poolState{}
	for _, kv := range resp.Kvs {
		pk, err := c.k.parse(string(kv.Key))
		if err != nil {
			continue
		}
		st, ok := states[pk.Pool]
		if !ok {
			st = newPoolState(c.k, pk.Pool)
			st.rev = resp.Header.Revision
			states[pk.Pool] = st
		}
		st.put(kv)
	}
	var out []PoolStatus
	for _, name := range sortedKeys(states) {
		if st := states[name]; st.specKV != nil {
			out = append(out, statusOf(st))
		}
	}
	return out, nil
}
