package agent

import (
	"context"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// defaultWaitLogInterval is how often a waiting sidecar repeats in its log
// why it still waits, besides logging each change at once.
const defaultWaitLogInterval = 30 * time.Second

// seatView is what /seat serves: the claim record and, while the sidecar
// waits, why (the same status its log and /startupz give).
type seatView struct {
	SeatRecord
	Waiting *coordinator.WaitStatus `json:"waiting,omitempty"`
}

// WaitStatus returns why the sidecar waits for a seat, and whether it is
// waiting with a known reason.
func (s *Sidecar) WaitStatus() (coordinator.WaitStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waitSt == nil {
		return coordinator.WaitStatus{}, false
	}
	return *s.waitSt, true
}

// onWait is the claim's WithWaitStatus hook: it records the status for
// the probes and /seat and logs it.
func (s *Sidecar) onWait(st coordinator.WaitStatus) {
	s.mu.Lock()
	s.waitSt = &st
	s.mu.Unlock()
	s.o.log.Info("waiting for a seat", "pool", s.cfg.Pool, "reason", st.Reason, "why", st.String(), "ahead", st.Ahead, "inLine", st.InLine)
}

// clearWait forgets the wait status once the wait is over.
func (s *Sidecar) clearWait() {
	s.mu.Lock()
	s.waitSt = nil
	s.mu.Unlock()
}

// logWhileWaiting repeats why the sidecar waits every waitLogEvery until
// ctx ends or stop is called, so a long wait never goes silent.
func (s *Sidecar) logWhileWaiting(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		t := time.NewTicker(s.waitLogEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			why, reason := "no answer from etcd yet", coordinator.WaitReason("")
			if st, ok := s.WaitStatus(); ok {
				why, reason = st.String(), st.Reason
			}
			s.o.log.Info("still waiting for a seat", "pool", s.cfg.Pool, "reason", reason, "why", why,
				"waited", time.Since(start).Round(time.Second).String())
		}
	}()
	return func() { cancel(); <-done }
}
