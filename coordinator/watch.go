package coordinator

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch streams the events of one pool, or of every pool when pool is "".
// It lists first and watches from the listing's revision + 1 with
// WithRequireLeader. When the watch breaks (compaction, a lost leader, a
// closed stream) it sends EventResync, re-lists and continues; it never
// resumes at a compacted revision. The channel is closed when ctx ends or the
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
		if wr.Err() != nil {
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
	var out []Event
	for _, ev := range evs {
		pk, err := c.k.parse(string(ev.Kv.Key))
		if err != nil {
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
		var rec seatRecord
		_ = json.Unmarshal(kv.Value, &rec)
		e.Token, e.Holder, e.Tenant, e.Instance = kv.CreateRevision, rec.Holder, rec.Tenant, rec.Instance
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
		var rec waiterRecord
		_ = json.Unmarshal(kv.Value, &rec)
		e.Holder, e.Tenant = rec.Holder, rec.Tenant
	}
	return e, true
}
