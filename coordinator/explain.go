package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Explain answers an operator's "why is my claim not granted": would a
// claim with opts be granted now, and if not, every reason that stands in
// the way and what would have to change. The verdict is the planner's own
// (the plan a claim would build on the same read); each reason comes from
// the planner's own step for it (queue, capacity, tenant, instance), so
// Explain never disagrees with Claim on the same state. It reads the pool
// once and writes nothing; WithWait and WithHolder are ignored. A pool
// that claims cannot run on (a foreign key, a malformed spec) is an error,
// as it would be for Claim; ctx bounds the read. A claim that the pool
// would grant but that this process's Claim refuses because earlier
// waiters of its tenant and instance selector, held back, are taking their
// turns first (heldback.go) is not granted here either: the turns are its
// blocker. Those of other processes it cannot see.
func (c *Coordinator) Explain(ctx context.Context, pool string, opts ...ClaimOption) (Explanation, error) {
	o := claimOptions{holder: "explain"}
	for _, opt := range opts {
		opt(&o)
	}
	o.holder, o.wait, o.onWait = "explain", false, nil
	if err := o.validate(); err != nil {
		return Explanation{}, err
	}
	st, err := c.readPool(ctx, pool)
	if err != nil {
		return Explanation{}, err
	}
	e, err := st.explain(o)
	if err == nil && e.Granted { // else a waiting claim reports the first blocker, as Claim does
		if turns := c.heldBackAhead(pool, o); turns != nil {
			ws := waitStatusOf(turns, o)
			e.Granted = false
			e.Blockers = append(e.Blockers, Blocker{Reason: ws.Reason, Detail: ws.Detail,
				Change: "they join the line, in their turn, and are served: a claim of their kind made meanwhile does not go before them"})
		}
	}
	return e, err
}

// Explanation is the answer of Explain.
type Explanation struct {
	Pool     string            `json:"pool"`
	Tenant   string            `json:"tenant,omitempty"`
	Instance string            `json:"instance,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Revision is the etcd revision the answer holds at.
	Revision int64 `json:"revision"`
	// Spec and Held are the pool's spec and held seats at Revision.
	Spec PoolSpec `json:"spec"`
	Held int      `json:"held"`
	// Granted says a claim with these options would be granted now.
	Granted bool `json:"granted"`
	// Never says it cannot be granted until the pool's spec changes (a
	// tenant denied by a limit of 0): Claim fails at once, waiting or not.
	Never bool `json:"never"`
	// Blockers are everything in the way, in the order the planner checks
	// them; empty when Granted. A claim that waits reports the first.
	Blockers []Blocker `json:"blockers"`
	// Instances are, for a claim that binds to instances, each registered
	// instance (and a named one that is not) and whether it would take
	// the claim; nil for anonymous seats.
	Instances []InstanceFit `json:"instances"`
}

// Blocker is one reason a claim is not granted now.
type Blocker struct {
	Reason WaitReason `json:"reason"`
	Detail string     `json:"detail"`
	// Change says what would have to change for this reason to go away.
	Change string `json:"change"`
}

// InstanceFit says whether one instance would take a claim.
type InstanceFit struct {
	ID    string        `json:"id"`
	State InstanceState `json:"state"` // "" for a named instance that is not registered
	Held  int           `json:"held"`
	Seats int           `json:"seats"`
	Fits  bool          `json:"fits"`
	// Why says why it does not fit; empty when it fits.
	Why string `json:"why,omitempty"`
}

func (s *poolState) explain(o claimOptions) (Explanation, error) {
	e := Explanation{Pool: s.pool, Tenant: o.tenant, Instance: o.instance, Labels: o.labels, Revision: s.rev,
		Spec: s.spec, Held: len(s.seats), Blockers: []Blocker{}}
	_, err := s.plan(claimRequest{opts: o})
	if err != nil && !errors.Is(err, ErrNoSeat) && !errors.Is(err, ErrInstanceNotFound) {
		return Explanation{}, err // no claim can run on this pool now
	}
	e.Granted = err == nil
	e.Instances = s.instanceFits(o)
	if e.Granted {
		return e, nil
	}
	for _, b := range s.blockers(o) {
		e.Blockers = append(e.Blockers, s.blocker(b, o))
		e.Never = e.Never || never(b)
	}
	if len(e.Blockers) == 0 { // the plan's refusal, whatever no single step names
		e.Blockers = append(e.Blockers, s.blocker(err, o))
	}
	return e, nil
}

// blockers runs each planner step that can refuse a claim on its own and
// returns every refusal, in the planner's order.
func (s *poolState) blockers(o claimOptions) []error {
	var out []error
	req, scratch := claimRequest{opts: o}, &claimPlan{}
	if err := s.denied(o); err != nil {
		out = append(out, err)
	}
	if err := s.planQueue(scratch, req); err != nil {
		out = append(out, err)
	}
	// Capacity: the plan of the same claim on this state without its
	// queue and tenant (said above), whose first step after them is the
	// pool's seats.
	bare := s.clone()
	bare.queue, bare.line = map[string]*mvccpb.KeyValue{}, nil
	noTenant := req
	noTenant.opts.tenant = ""
	if _, err := bare.plan(noTenant); errors.Is(err, ErrNoSeat) && waitStatusOf(err, o).Reason == WaitPoolFull {
		out = append(out, err)
	}
	if s.denied(o) == nil {
		if err := s.planTenant(scratch, req); err != nil {
			out = append(out, err)
		}
	}
	if err := s.planInstance(scratch, req); err != nil {
		out = append(out, err)
	}
	return out
}

// blocker describes one refusal and what would lift it.
func (s *poolState) blocker(err error, o claimOptions) Blocker {
	ws := waitStatusOf(err, o)
	b := Blocker{Reason: ws.Reason, Detail: ws.Detail}
	limit, _ := s.spec.LimitFor(o.tenant)
	switch ws.Reason {
	case WaitTenantDenied:
		b.Change = fmt.Sprintf("the pool spec gives tenant %q a limit above 0", o.tenant)
	case WaitQueue:
		b.Change = fmt.Sprintf("the %d %s in line are served or leave: a claim never jumps the queue",
			len(s.queue), plural(len(s.queue), "claimant", "claimants"))
	case WaitPoolFull:
		b.Change = fmt.Sprintf("a holder releases one of the %d seats held, or the capacity (%d) is raised", len(s.seats), s.spec.Capacity)
	case WaitTenantLimit:
		b.Change = fmt.Sprintf("tenant %q releases one of its %d seats, or its limit (%d) is raised", o.tenant, len(s.tenants[o.tenant]), limit)
	case WaitNoMatchingInstance:
		b.Change = "an instance it selects is registered, undrained or has a seat released (see the instances)"
		if o.instance != "" {
			if _, ok := s.instances[o.instance]; !ok {
				b.Change = fmt.Sprintf("an agent registers instance %q in pool %q", o.instance, s.pool)
			}
		}
	case WaitInstancesFull:
		b.Change = "a holder on a ready instance releases its seat, a draining instance is undrained, or an agent registers another"
		if len(s.instances) == 0 {
			b.Change = fmt.Sprintf("an agent registers a ready instance in pool %q that the claim selects", s.pool)
		}
	}
	return b
}

// instanceFits says, for a claim that binds to instances, which would take
// it: fits is the planner's rule; the reasons spell out its parts.
func (s *poolState) instanceFits(o claimOptions) []InstanceFit {
	if !s.bound() && o.instance == "" && len(o.labels) == 0 {
		return nil
	}
	out := []InstanceFit{}
	for _, id := range sortedKeys(s.instances) {
		in := s.instances[id]
		f := InstanceFit{ID: id, State: in.State, Held: len(s.binds[id]), Seats: in.Seats, Fits: s.fits(id, in, o)}
		if !f.Fits {
			f.Why = whyNotFits(id, in, o, f.Held)
		}
		out = append(out, f)
	}
	if _, ok := s.instances[o.instance]; o.instance != "" && !ok {
		out = append(out, InstanceFit{ID: o.instance, Why: "not registered"})
	}
	return out
}

// whyNotFits names the parts of fits that an instance fails.
func whyNotFits(id string, in Instance, o claimOptions, held int) string {
	var why []string
	if o.instance != "" && id != o.instance {
		why = append(why, "not the instance asked for")
	}
	if in.State != InstanceReady {
		why = append(why, string(in.State))
	}
	for _, k := range sortedKeys(o.labels) {
		if v, ok := in.Labels[k]; !ok {
			why = append(why, fmt.Sprintf("no label %s", k))
		} else if v != o.labels[k] {
			why = append(why, fmt.Sprintf("label %s=%s, not %s", k, v, o.labels[k]))
		}
	}
	if held >= in.Seats {
		why = append(why, fmt.Sprintf("full (%d of %d seats held)", held, in.Seats))
	}
	return strings.Join(why, "; ")
}
