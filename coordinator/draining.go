package coordinator

import "encoding/json"

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
// monitor last saw it, says it drains (DrainState; Draining closes at the
// first drain). The monitor passes the key's last write in each watch
// response, or its value just read, never an earlier write of a response:
// the monitor watches from the grant and starts when first asked, so a
// response may replay history (a drain since undone, an undrain since
// drained again), and a replayed state is not told. A response holds
// every change of the key up to its revision, so its last write is the
// key's state as of that revision, replayed or live; a later change comes
// in a later response. (etcd cuts a replay after 1,000 revisions of the
// watched key, watchBatchMaxRevs, and sends the rest at once: a key
// written that often between the grant and the monitor's start is told an
// older state for that moment.) So the monitor never waits on a read to
// tell a state: one that did, for a replayed drain, left the seat's
// delete unhandled while the read was slow (TestReplayedDrainNeedsNoRead).
func (cl *Claim) instanceState(v []byte) {
	if on, ok := drainingIn(v); ok {
		cl.setDraining(on)
	}
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
