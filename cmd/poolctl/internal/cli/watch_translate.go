package cli

import (
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
)

// poolctl watch reads etcd's watch itself, rather than through
// coordinator.Watch, because it needs what that stream does not give: a
// start revision (--rev), the records' own timestamps, the old spec of a
// spec-changed event, and a word when the stream breaks. The event types
// and their fields are the coordinator's (coordinator/watch.go);
// TestWatchMatchesCoordinator checks that both streams agree.

// Where an event's time comes from.
const (
	// timeRecord is the timestamp the writer put in the record: a seat's
	// claimedAt, a release's at, a waiter's since (the writer's clock;
	// etcd itself keeps no commit times).
	timeRecord = "record"
	// timeReceived is when poolctl received the event: for events whose
	// key carries no timestamp, and for records without one.
	timeReceived = "received"
	// timeReplayed is timeReceived for an event that --rev replayed from
	// history: its time says when poolctl read it, nothing about when it
	// happened. Tables show it as "-".
	timeReplayed = "replayed"
)

// watchEvent is one event of poolctl watch.
type watchEvent struct {
	coordinator.Event
	// TimeSource says where Event.Time comes from: timeRecord or
	// timeReceived.
	TimeSource string
	// Changes is what a spec-changed event changed.
	Changes []specChangeView
}

// The stored values watch decodes. They mirror the JSON the coordinator
// writes (coordinator/types.go: seatRecord, waiterRecord, releaseRecord),
// which it does not export; only the fields shown here are read.
type (
	storedSeat struct {
		Holder    string    `json:"holder"`
		Tenant    string    `json:"tenant"`
		Instance  string    `json:"instance"`
		ClaimedAt time.Time `json:"claimedAt"`
	}
	storedWaiter struct {
		Holder string    `json:"holder"`
		Tenant string    `json:"tenant"`
		Since  time.Time `json:"since"`
		Reason string    `json:"reason"` // waiting records only
	}
	storedRelease struct {
		Token  int64     `json:"token"`
		Forced bool      `json:"forced"`
		Reason string    `json:"reason"`
		At     time.Time `json:"at"`
	}
)

// translator turns raw etcd events under root into watch events.
type translator struct {
	root string
	now  func() time.Time
}

// translate reads the events of one response revision by revision, so
// that a seat's delete is told apart by the release record its
// transaction wrote.
func (t translator) translate(evs []*clientv3.Event) []watchEvent {
	var out []watchEvent
	for start := 0; start < len(evs); {
		end := start
		for end < len(evs) && evs[end].Kv.ModRevision == evs[start].Kv.ModRevision {
			end++
		}
		out = append(out, t.revision(evs[start:end])...)
		start = end
	}
	return out
}

// seatRef names a seat of a pool.
type seatRef struct {
	pool string
	seat int
}

func (t translator) revision(evs []*clientv3.Event) []watchEvent {
	released := map[seatRef]storedRelease{}
	deleted := map[string]bool{}
	for _, ev := range evs {
		pk, err := coordinator.ParseKey(t.root, string(ev.Kv.Key))
		switch {
		case err != nil:
		case pk.Seg == coordinator.SegReleased && ev.Type == clientv3.EventTypePut:
			var r storedRelease
			if json.Unmarshal(ev.Kv.Value, &r) == nil {
				released[seatRef{pk.Pool, pk.Slot}] = r
			}
		case pk.Seg == coordinator.SegSpec && ev.Type == clientv3.EventTypeDelete:
			deleted[pk.Pool] = true
		}
	}
	now := t.now().UTC()
	moved := coordinator.WaiterMoves(t.root, evs)
	var out []watchEvent
	for _, ev := range evs {
		pk, err := coordinator.ParseKey(t.root, string(ev.Kv.Key))
		if err != nil || moved[string(ev.Kv.Key)] {
			continue
		}
		e := watchEvent{Event: coordinator.Event{Pool: pk.Pool, Seat: -1, Revision: ev.Kv.ModRevision, Time: now},
			TimeSource: timeReceived}
		ok := false
		switch pk.Seg {
		case coordinator.SegSpec:
			e, ok = specWatchEvent(e, ev), true
		case coordinator.SegInstances:
			e, ok = instanceWatchEvent(e, ev, pk.Name)
		case coordinator.SegSeats:
			e, ok = seatWatchEvent(e, ev, pk.Slot, released[seatRef{pk.Pool, pk.Slot}], deleted[pk.Pool])
		case coordinator.SegQueue:
			e, ok = waiterWatchEvent(e, ev), true
		case coordinator.SegWaiting:
			e, ok = heldBackWatchEvent(e, ev)
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

// stamp sets the event's time from a record, when it has one.
func (e *watchEvent) stamp(t time.Time) {
	if !t.IsZero() {
		e.Time, e.TimeSource = t.UTC(), timeRecord
	}
}

func specWatchEvent(e watchEvent, ev *clientv3.Event) watchEvent {
	switch {
	case ev.Type == clientv3.EventTypeDelete:
		e.Type = coordinator.EventPoolDeleted
	case ev.IsCreate():
		e.Type = coordinator.EventPoolCreated
	default:
		e.Type = coordinator.EventSpecChanged
		var old, cur coordinator.PoolSpec
		if ev.PrevKv != nil && json.Unmarshal(ev.PrevKv.Value, &old) == nil && json.Unmarshal(ev.Kv.Value, &cur) == nil {
			e.Changes = specChanges(old, cur)
		}
	}
	return e
}

func instanceWatchEvent(e watchEvent, ev *clientv3.Event, id string) (watchEvent, bool) {
	e.Instance = id
	if ev.Type == clientv3.EventTypeDelete {
		e.Type = coordinator.EventInstanceDown
		return e, true
	}
	var in, prev coordinator.Instance
	_ = json.Unmarshal(ev.Kv.Value, &in)
	if ev.PrevKv != nil {
		_ = json.Unmarshal(ev.PrevKv.Value, &prev)
	}
	if ev.PrevKv != nil && !ev.IsCreate() && prev.State == in.State {
		return e, false // re-registration without a state change
	}
	e.Type = coordinator.EventInstanceUp
	if in.State == coordinator.InstanceDraining {
		e.Type = coordinator.EventInstanceDraining
	}
	return e, true
}

func seatWatchEvent(e watchEvent, ev *clientv3.Event, seat int, rel storedRelease, poolDeleted bool) (watchEvent, bool) {
	e.Seat = seat
	kv := ev.Kv
	if ev.Type == clientv3.EventTypeDelete {
		kv = ev.PrevKv
	}
	var rec storedSeat
	if kv != nil {
		_ = json.Unmarshal(kv.Value, &rec)
		e.Token, e.Holder, e.Tenant, e.Instance = kv.CreateRevision, rec.Holder, rec.Tenant, rec.Instance
	}
	switch {
	case ev.Type == clientv3.EventTypePut:
		e.Type = coordinator.EventSeatClaimed
		e.stamp(rec.ClaimedAt)
		return e, ev.IsCreate()
	case rel.Token != 0 && rel.Token == e.Token && rel.Forced:
		e.Type, e.Reason = coordinator.EventSeatForceReleased, rel.Reason
		e.stamp(rel.At)
	case rel.Token != 0 && rel.Token == e.Token:
		e.Type, e.Reason = coordinator.EventSeatReleased, rel.Reason
		e.stamp(rel.At)
	case poolDeleted:
		e.Type, e.Reason = coordinator.EventSeatReleased, coordinator.ReasonPoolDeleted
	default:
		e.Type, e.Reason = coordinator.EventSeatExpired, coordinator.ReasonExpired
	}
	return e, true
}

func waiterWatchEvent(e watchEvent, ev *clientv3.Event) watchEvent {
	kv := ev.Kv
	e.Type = coordinator.EventWaiterJoined
	if ev.Type == clientv3.EventTypeDelete {
		kv, e.Type = ev.PrevKv, coordinator.EventWaiterLeft
	}
	if kv != nil {
		var rec storedWaiter
		_ = json.Unmarshal(kv.Value, &rec)
		e.Holder, e.Tenant = rec.Holder, rec.Tenant
		if ev.Type == clientv3.EventTypePut {
			e.stamp(rec.Since)
		}
	}
	return e
}

// heldBackWatchEvent is a waiter held back off the line (its waiting
// record): joined, with why, when the record is created; left when it is
// deleted; a rewrite (its reason changed) is no event.
func heldBackWatchEvent(e watchEvent, ev *clientv3.Event) (watchEvent, bool) {
	if ev.Type == clientv3.EventTypePut && !ev.IsCreate() {
		return e, false
	}
	e = waiterWatchEvent(e, ev)
	if kv := ev.Kv; ev.Type == clientv3.EventTypePut {
		var rec storedWaiter
		_ = json.Unmarshal(kv.Value, &rec)
		e.Reason = rec.Reason
	}
	return e, true
}
