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
// instance made ready again (poolctl undrain). Act on the answer, then
// call it again once the channel is closed: the answer may say draining
// already (the monitor runs from the first call of Done, Err, Draining or
// DrainState). The first call starts the monitor, as Draining does; it
// may answer false for an instance draining already, and the channel
// closes as soon as the monitor sees it. For an anonymous seat it is
// false and the channel never closes.
func (cl *Claim) DrainState() (draining bool, changed <-chan struct{}) {
	cl.monOnce.Do(cl.startMonitor)
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.drainOn, cl.drainMove
}

// instanceState records whether v, the bound instance's value as the
// monitor saw it, says it drains (DrainState; Draining closes at the
// first drain). A watch event may replay history (the monitor watches
// from the grant, and starts when first asked: a drain since undone, or
// an undrain since drained again, would show), so one older than its
// watch response's revision (current false) that would change the state
// is confirmed by reading the key now, and the key's state now is what is
// recorded. A value just read, or an event at its response's revision (a
// live one), is current: it is recorded as it is, and the monitor does
// not wait on a read for it.
func (cl *Claim) instanceState(ctx context.Context, v []byte, current bool) {
	on, ok := drainingIn(v)
	if !ok {
		return
	}
	if !current && on != cl.drainingNow() {
		kv, _ := cl.reread(ctx, cl.c.k.instance(cl.pool, cl.rec.Instance))
		if kv == nil {
			return // gone (the watch's delete tells), or the monitor stopped
		}
		if on, ok = drainingIn(kv.Value); !ok {
			return
		}
	}
	cl.setDraining(on)
}

// drainingNow is the drain state as last recorded.
func (cl *Claim) drainingNow() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.drainOn
}

// setDraining records on as the instance's drain state, before Draining
// closes: a caller woken by Draining finds DrainState saying so.
func (cl *Claim) setDraining(on bool) {
	cl.mu.Lock()
	if cl.drainOn != on {
		cl.drainOn = on
		close(cl.drainMove)
		cl.drainMove = make(chan struct{})
	}
	cl.mu.Unlock()
	if on {
		cl.drainOnce.Do(func() { close(cl.drainc) })
	}
}

// drainingIn reports whether v, an instance's value, says it drains, and
// false for ok when v is not an instance's value.
func drainingIn(v []byte) (draining, ok bool) {
	var in Instance
	if json.Unmarshal(v, &in) != nil {
		return false, false
	}
	return in.State == InstanceDraining, true
}
