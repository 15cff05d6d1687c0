package coordinator

import (
	"context"
	"encoding/json"
)

// Draining returns a channel that is closed once the instance the seat is
// bound to is seen draining (an agent stopping, or poolctl drain), while
// the seat is still held: finish the work on it and release the seat
// before the drain's timeout, at which the agent deregisters the instance
// and Done closes with ErrInstanceGone. Like Done, the first call starts
// the claim's monitor, which sees the instance's changes from the grant
// on; a drain undone before then is not reported. It never closes for an
// anonymous seat, and it is not a loss: Done stays open. It closes once:
// DrainState tells when the instance is made ready again (poolctl
// undrain).
func (cl *Claim) Draining() <-chan struct{} {
	cl.monOnce.Do(cl.startMonitor)
	return cl.drainc
}

// DrainState reports whether the instance the seat is bound to is
// draining, as the claim's monitor last saw it, and a channel that is
// closed at the next change of that: a drain, as Draining tells, or the
// instance made ready again (poolctl undrain). Call it again once the
// channel is closed. The first call starts the monitor, as Draining
// does, so the first answer may be false for an instance draining
// already: the channel closes as soon as the monitor sees it. For an
// anonymous seat it is false and the channel never closes.
func (cl *Claim) DrainState() (draining bool, changed <-chan struct{}) {
	cl.monOnce.Do(cl.startMonitor)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.drainOn, cl.drainMove
}

// instanceState records whether v, the bound instance's value as the
// monitor saw it, says it drains (DrainState; Draining closes at the
// first drain). A watch event may replay history (the monitor watches
// from the grant, and starts when first asked: a drain since undone would
// show), so one that says it drains is confirmed by reading the key now
// (current false); a value just read is current. One that says it is
// ready is taken as it is: any later change follows it in the watch.
func (cl *Claim) instanceState(ctx context.Context, v []byte, current bool) {
	var in Instance
	if json.Unmarshal(v, &in) != nil {
		return
	}
	on := in.State == InstanceDraining
	if on && !current {
		kv, _ := cl.reread(ctx, cl.c.k.instance(cl.pool, cl.rec.Instance))
		if kv == nil || !draining(kv.Value) {
			return // not now (or gone: the watch's delete tells)
		}
	}
	cl.setDraining(on)
}

// setDraining records on as the instance's drain state.
func (cl *Claim) setDraining(on bool) {
	if on {
		cl.drainOnce.Do(func() { close(cl.drainc) })
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.drainOn == on {
		return
	}
	cl.drainOn = on
	close(cl.drainMove)
	cl.drainMove = make(chan struct{})
}

// draining reports whether v, an instance's value, says it drains.
func draining(v []byte) bool {
	var in Instance
	return json.Unmarshal(v, &in) == nil && in.State == InstanceDraining
}
