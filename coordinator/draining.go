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
// anonymous seat, and it is not a loss: Done stays open. An instance made
// ready again (poolctl undrain) does not reopen it; read the instance
// (Coordinator.GetInstance) if that matters.
func (cl *Claim) Draining() <-chan struct{} {
	cl.monOnce.Do(cl.startMonitor)
	return cl.drainc
}

// instanceState closes Draining when v, the bound instance's value as the
// monitor saw it, says it drains. A watch event may replay history (the
// monitor watches from the grant, and starts when first asked: a drain
// since undone would show), so one that says so is confirmed by reading
// the key now (current false); a value just read is current.
func (cl *Claim) instanceState(ctx context.Context, v []byte, current bool) {
	if !draining(v) {
		return
	}
	if !current {
		kv, _ := cl.reread(ctx, cl.c.k.instance(cl.pool, cl.rec.Instance))
		if kv == nil || !draining(kv.Value) {
			return // not now (or gone: the watch's delete tells)
		}
	}
	cl.drainOnce.Do(func() { close(cl.drainc) })
}

// draining reports whether v, an instance's value, says it drains.
func draining(v []byte) bool {
	var in Instance
	return json.Unmarshal(v, &in) == nil && in.State == InstanceDraining
}
