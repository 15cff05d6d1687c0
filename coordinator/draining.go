package coordinator

import "encoding/json"

// Draining returns a channel that is closed once the instance the seat is
// bound to is seen draining (an agent stopping, or poolctl drain), while
// the seat is still held: finish the work on it and release the seat
// before the drain's timeout, at which the agent deregisters the instance
// and Done closes with ErrInstanceGone. Like Done, the first call starts
// the claim's monitor, which sees the instance's changes from the grant
// on. It never closes for an anonymous seat, and it is not a loss: Done
// stays open. An instance made ready again (poolctl undrain) does not
// reopen it; read the instance (Coordinator.GetInstance) if that matters.
func (cl *Claim) Draining() <-chan struct{} {
	cl.monOnce.Do(cl.startMonitor)
	return cl.drainc
}

// instanceState closes Draining when v, the bound instance's value as the
// monitor saw it, says it drains.
func (cl *Claim) instanceState(v []byte) {
	var in Instance
	if json.Unmarshal(v, &in) == nil && in.State == InstanceDraining {
		cl.drainOnce.Do(func() { close(cl.drainc) })
	}
}
