package coordinator

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// Watch streams the events of one pool, or of every pool when pool is "".
// It lists first and watches from the listing's revision + 1 with
// WithRequireLeader. When the watch breaks (compaction, a lost leader, a
// closed stream) it sends EventResync, re-lists and continues; it never
// resumes at a compacted revision. A read or watch that etcd refuses
// (permission denied) is logged at warn level and retried every 500 ms,
// like any other failure. The channel is closed when ctx ends or the
// Coordinator is closed. A slow reader slows the stream; nothing is dropped
// except across a resync. Watch reads once before it returns, so every change
// committed after it returns is delivered; if that read fails, the stream
// starts with EventResync once etcd answers. That first read waits at most
// the cleanup timeout (WithCleanupTimeout). A pool name that ValidateName
// rejects yields a closed channel.
func (c *Coordinator) Watch(ctx context.Context, pool string) <-chan Event {
	return c.startStream(ctx, pool, 0, relist)
}

// watchMode is what a stream does when its watch breaks.
type watchMode int

const (
	// relist (Watch): send EventResync and go on from the current revision.
	relist watchMode = iota
	// resume (WatchFrom): go on after the last revision delivered; only a
	// compaction skips, with EventResync.
	resume
)

// startStream is the common start of Watch and WatchFrom: validate, read
// the current revision once when after is 0 (so that every change committed
// after the call returns is delivered), and stream in the background.
func (c *Coordinator) startStream(ctx context.Context, pool string, after int64, mode watchMode) <-chan Event {
	out := make(chan Event, 64)
	prefix := c.k.pools()
	if pool != "" {
		if ValidateName(pool) != nil {
			close(out)
			return out
		}
		prefix = c.k.pool(pool)
	}
	if after == 0 {
		gctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
		if resp, err := c.cli.Get(gctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
			after = resp.Header.Revision
		}
		cancel()
	}
	started := c.goBackground(func(bctx context.Context) {
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(bctx, cancel)
		defer stop()
		c.stream(ctx, prefix, after, mode, out)
	})
	if !started {
		close(out) // the Coordinator is closed
	}
	return out
}

// stream sends the events of prefix after revision after (0: unknown yet)
// until ctx ends, recovering from broken watches as mode says.
func (c *Coordinator) stream(ctx context.Context, prefix string, after int64, mode watchMode, out chan<- Event) {
	send := func(ev Event) bool {
		ev.Time = time.Now().UTC()
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	for ctx.Err() == nil {
		if after == 0 { // (re-)list, and in relist mode say so
			resp, err := c.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				c.streamBroke(prefix, "read", err)
				pause()
				continue
			}
			after = resp.Header.Revision
			if mode == relist && !send(Event{Type: EventResync, Seat: -1, Revision: after}) {
				return
			}
		}
		last, compacted := c.watchOnce(ctx, prefix, after, mode, send)
		switch {
		case mode == relist:
			after = 0
		case compacted:
			after = last
		default:
			after = last
			pause()
		}
	}
}

// watchOnce watches from after+1 until the watch breaks or ctx ends, and
// returns the last revision delivered and whether the watch was compacted
// (in resume mode it has then sent EventResync and returns the revision to
// resume after).
func (c *Coordinator) watchOnce(ctx context.Context, prefix string, after int64, mode watchMode, send func(Event) bool) (int64, bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a broken watch is cancelled, not left registered
	wch := c.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(),
		clientv3.WithRev(after+1), clientv3.WithPrevKV())
	for wr := range wch {
		if wr.CompactRevision > after+1 {
			if mode == resume {
				send(Event{Type: EventResync, Seat: -1, Revision: wr.CompactRevision})
			}
			return wr.CompactRevision - 1, true
		}
		if err := etcdclient.WatchErr(wr); err != nil {
			c.streamBroke(prefix, "watch", err)
			return after, false
		}
		for _, ev := range c.translate(wr.Events) {
			if !send(ev) {
				return after, false
			}
		}
		if n := len(wr.Events); n > 0 {
			after = wr.Events[n-1].Kv.ModRevision
		}
	}
	return after, false
}

// streamBroke logs why an event stream's read or watch failed: at warn
// level when retrying cannot help (etcd refuses it), since the stream has
// no other way to say so.
func (c *Coordinator) streamBroke(prefix, op string, err error) {
	if etcdclient.IsPermanent(err) {
		c.log.Warn("event stream refused; retrying", "prefix", prefix, "op", op, "err", err)
		return
	}
	c.log.Debug("event stream broke; retrying", "prefix", prefix, "op", op, "err", err)
}

// translate turns the raw events of one watch response into pool events.
// Events of one revision are read together so that a seat delete can be told
// apart by the release record written in the same transaction.
func (c *Coordinator) translate(evs []*clientv3.Event) []Event {
	var out []Event
	for start := 0; start < len(evs); {
		end := start
		for end < len(evs) && evs[end].Kv.ModRevision == evs[start].Kv.ModRevision {
			end++
		}
		out = append(out, c.translateRevision(evs[start:end])...)
		start = end
	}
	return out
}

func (c *Coordinator) translateRevision(evs []*clientv3.Event) []Event {
	released := map[string]releaseRecord{} // seat prefix -> record
	deletedPools := map[string]bool{}
	for _, ev := range evs {
		pk, err := c.k.parse(string(ev.Kv.Key))
		if err != nil {
			continue
		}
		switch {
		case pk.Seg == segReleased && ev.Type == clientv3.EventTypePut:
			var r releaseRecord
			if json.Unmarshal(ev.Kv.Value, &r) == nil {
				released[slotPrefix(c.k.seats(pk.Pool), pk.Slot)] = r
			}
		case pk.Seg == segSpec && ev.Type == clientv3.EventTypeDelete:
			deletedPools[pk.Pool] = true
		}
	}
	moved := WaiterMoves(c.k.root, evs)
	var out []Event
	for _, ev := range evs {
		pk, err := c.k.parse(string(ev.Kv.Key))
		if err != nil || moved[string(ev.Kv.Key)] {
			continue
		}
		e := Event{Pool: pk.Pool, Seat: -1, Revision: ev.Kv.ModRevision}
		var ok bool
		switch pk.Seg {
		case segSpec:
			e, ok = specEvent(e, ev)
		case segInstances:
			e, ok = instanceEvent(e, ev, pk.Name)
		case segSeats:
			e, ok = seatEvent(e, ev, pk.Slot, released[slotOf(string(ev.Kv.Key))], deletedPools[pk.Pool])
		case segQueue:
			e, ok = waiterEvent(e, ev)
		case segWaiting:
			e, ok = heldBackEvent(e, ev)
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

func specEvent(e Event, ev *clientv3.Event) (Event, bool) {
	switch {
	case ev.Type == clientv3.EventTypeDelete:
		e.Type = EventPoolDeleted
	case ev.IsCreate():
		e.Type = EventPoolCreated
	default:
		e.Type = EventSpecChanged
	}
	return e, true
}

func instanceEvent(e Event, ev *clientv3.Event, id string) (Event, bool) {
	e.Instance = id
	if ev.Type == clientv3.EventTypeDelete {
		e.Type = EventInstanceDown
		return e, true
	}
	var in, prev Instance
	_ = json.Unmarshal(ev.Kv.Value, &in)
	if ev.PrevKv != nil {
		_ = json.Unmarshal(ev.PrevKv.Value, &prev)
	}
	if ev.PrevKv != nil && !ev.IsCreate() && prev.State == in.State {
		return e, false // re-registration without a state change
	}
	e.Type = EventInstanceUp
	if in.State == InstanceDraining {
		e.Type = EventInstanceDraining
	}
	return e, true
}

func seatEvent(e Event, ev *clientv3.Event, seat int, rel releaseRecord, poolDeleted bool) (Event, bool) {
	e.Seat = seat
	kv := ev.Kv
	if ev.Type == clientv3.EventTypeDelete {
		kv = ev.PrevKv
	}
	if kv != nil {
		rec, _ := decodeSeatRecord(kv.Value)
		e.Token, e.Holder, e.Tenant, e.Instance = kv.CreateRevision, rec.Holder, rec.Tenant, rec.Instance
	} else if ev.Type == clientv3.EventTypeDelete && rel.Token != 0 {
		// A delete without its previous value (etcd has none at the
		// compact revision, where WatchFrom resumes): the release record
		// written in the same revision names the seat it freed
		// (TestWatchFromTypesReleaseAtCompactRevision).
		e.Token = rel.Token
	}
	switch {
	case ev.Type == clientv3.EventTypePut:
		e.Type = EventSeatClaimed
		return e, ev.IsCreate()
	case rel.Token != 0 && rel.Token == e.Token && rel.Forced:
		e.Type, e.Reason, e.By = EventSeatForceReleased, rel.Reason, rel.By
	case rel.Token != 0 && rel.Token == e.Token:
		e.Type, e.Reason = EventSeatReleased, rel.Reason
	case poolDeleted:
		e.Type, e.Reason = EventSeatReleased, ReasonPoolDeleted
	default:
		e.Type, e.Reason = EventSeatExpired, ReasonExpired
	}
	return e, true
}

func waiterEvent(e Event, ev *clientv3.Event) (Event, bool) {
	kv := ev.Kv
	e.Type = EventWaiterJoined
	if ev.Type == clientv3.EventTypeDelete {
		kv, e.Type = ev.PrevKv, EventWaiterLeft
	}
	if kv != nil {
		rec, _ := decodeWaiterRecord(kv.Value)
		e.Holder, e.Tenant = rec.Holder, rec.Tenant
	}
	return e, true
}

// heldBackEvent reports a waiter held back off the line (waiting.go):
// joined with its reason when its record is created, left when it is
// deleted. A rewrite (its reason changed) is no event.
func heldBackEvent(e Event, ev *clientv3.Event) (Event, bool) {
	kv := ev.Kv
	e.Type = EventWaiterJoined
	if ev.Type == clientv3.EventTypeDelete {
		kv, e.Type = ev.PrevKv, EventWaiterLeft
	} else if !ev.IsCreate() {
		return e, false
	}
	if kv != nil {
		var rec waitingRecord
		_ = json.Unmarshal(kv.Value, &rec)
		e.Holder, e.Tenant = rec.Holder, rec.Tenant
		if e.Type == EventWaiterJoined {
			e.Reason = string(rec.Reason)
		}
	}
	return e, true
}

// WaiterMoves returns, among the events of one revision under root, the
// keys of waiters that moved between the line and a waiting record in one
// txn (enqueue puts the queue key and deletes the record; stepping out of
// line does the reverse): the claimant waits on, so neither key is a
// waiter-joined or waiter-left event. For consumers that translate raw
// etcd events themselves, as Watch does.
func WaiterMoves(root string, evs []*clientv3.Event) map[string]bool {
	k := keys{root: root}
	type halves struct{ intoLine, outOfLine [2]string } // [queue key, waiting key]
	byLease := map[string]*halves{}
	for _, ev := range evs {
		pk, err := k.parse(string(ev.Kv.Key))
		if err != nil || (pk.Seg != segQueue && pk.Seg != segWaiting) {
			continue
		}
		id := pk.Pool + "/" + pk.Name[:hexWidth]
		h := byLease[id]
		if h == nil {
			h = &halves{}
			byLease[id] = h
		}
		put, q := ev.Type == clientv3.EventTypePut && ev.IsCreate(), pk.Seg == segQueue
		switch {
		case q && put:
			h.intoLine[0] = string(ev.Kv.Key)
		case !q && ev.Type == clientv3.EventTypeDelete:
			h.intoLine[1] = string(ev.Kv.Key)
		case q && ev.Type == clientv3.EventTypeDelete:
			h.outOfLine[0] = string(ev.Kv.Key)
		case !q && put:
			h.outOfLine[1] = string(ev.Kv.Key)
		}
	}
	out := map[string]bool{}
	for _, h := range byLease {
		for _, pair := range [][2]string{h.intoLine, h.outOfLine} {
			if pair[0] != "" && pair[1] != "" {
				out[pair[0]], out[pair[1]] = true, true
			}
		}
	}
	return out
}
