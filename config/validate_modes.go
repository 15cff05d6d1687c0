package config

import (
	"fmt"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/termsafe"
)

func (c Config) validateAgent() error {
	a := c.Agent
	if err := checkHostPort(a.Listen, false); err != nil {
		return fieldErr("agent.listen", "%v", err)
	}
	if err := c.checkTTL("agent.ttl", a.TTL); err != nil {
		return err
	}
	if err := checkNonNegative("agent.drainTimeout", a.DrainTimeout); err != nil {
		return err
	}
	if err := coordinator.ValidateAgentName(a.Name); err != nil {
		return &FieldError{Field: "agent.name", Err: err}
	}
	pools := map[string]bool{}
	for i, p := range a.Pools {
		if err := checkPool(fmt.Sprintf("agent.pools[%d]", i), p); err != nil {
			return err
		}
		if pools[p.Name] {
			return fieldErr(fmt.Sprintf("agent.pools[%d].name", i), "pool %q is listed twice", p.Name)
		}
		pools[p.Name] = true
	}
	seen, at := map[string]bool{}, map[string]string{}
	for i, in := range a.Instances {
		f := fmt.Sprintf("agent.instances[%d]", i)
		if err := checkInstance(f, in); err != nil {
			return err
		}
		if key := in.Pool + "/" + in.ID; seen[key] {
			return fieldErr(f+".id", "instance %q of pool %q is listed twice", in.ID, in.Pool)
		}
		seen[in.Pool+"/"+in.ID] = true
		if in.Address == "" {
			continue
		}
		if id, ok := at[in.Pool+"/"+in.Address]; ok {
			return fieldErr(f+".address", "%s is instance %q's address in pool %q already: one worker under two IDs would serve two claims at once", in.Address, id, in.Pool)
		}
		at[in.Pool+"/"+in.Address] = in.ID
	}
	return nil
}

// checkPool checks the pool's name and lets coordinator.PoolSpec.Validate
// judge its spec, the one rule for a spec wherever it comes from.
func checkPool(f string, p Pool) error {
	if err := checkName(f+".name", p.Name); err != nil {
		return err
	}
	if p.SeatTTL.D()%time.Second != 0 {
		return fieldErr(f+".seatTTL", "%v is not a whole number of seconds (the spec stores seconds)", p.SeatTTL)
	}
	if err := p.Spec().Validate(); err != nil {
		return &FieldError{Field: f, Err: err}
	}
	return nil
}

func checkInstance(f string, in Instance) error {
	if err := checkName(f+".pool", in.Pool); err != nil {
		return err
	}
	if err := checkName(f+".id", in.ID); err != nil {
		return err
	}
	if in.Address != "" {
		if err := checkHostPort(in.Address, true); err != nil {
			return fieldErr(f+".address", "%v", err)
		}
		if err := coordinator.ValidateInstanceAddr(in.Address); err != nil {
			return &FieldError{Field: f + ".address", Err: err}
		}
	}
	if in.Seats < 0 || in.Seats > coordinator.MaxInstanceSeats {
		return fieldErr(f+".seats", "%d is outside 1..%d (0 means 1)", in.Seats, coordinator.MaxInstanceSeats)
	}
	return checkLabels(f+".labels", in.Labels)
}

func (c Config) validateSidecar() error {
	s := c.Sidecar
	for _, n := range [][2]string{{"sidecar.pool", s.Pool}, {"sidecar.tenant", s.Tenant}, {"sidecar.instance", s.Instance}} {
		if n[1] != "" {
			if err := checkName(n[0], n[1]); err != nil {
				return err
			}
		}
	}
	if err := checkLabels("sidecar.labels", s.Labels); err != nil {
		return err
	}
	if err := termsafe.Check(s.Holder); err != nil {
		return fieldErr("sidecar.holder", "%v", err)
	}
	if len(s.Holder) > coordinator.MaxHolderLen {
		return fieldErr("sidecar.holder", "longer than %d bytes", coordinator.MaxHolderLen)
	}
	if err := c.checkTTL("sidecar.ttl", s.TTL); err != nil {
		return err
	}
	if err := checkHostPort(s.Listen, false); err != nil {
		return fieldErr("sidecar.listen", "%v", err)
	}
	if s.SeatFile == "" {
		return fieldErr("sidecar.seatFile", "must not be empty")
	}
	if s.EnvFile != "" && s.EnvFile == s.SeatFile {
		return fieldErr("sidecar.envFile", "must differ from sidecar.seatFile")
	}
	if err := checkNonNegative("sidecar.waitTimeout", s.WaitTimeout); err != nil {
		return err
	}
	if s.LossGrace < 0 || s.LossGrace.D() > s.TTL.D() {
		return fieldErr("sidecar.lossGrace", "%v is outside 0..sidecar.ttl (%v): waiting longer than a lease only delays the restart that queues again", s.LossGrace, s.TTL)
	}
	// etcd grants a lease's TTL in whole seconds (2.9s is 2s).
	if most := MaxAppStopWithin(s.TTL.D().Truncate(time.Second)); s.AppStopWithin < 0 || s.AppStopWithin.D() > most {
		return fieldErr("sidecar.appStopWithin", "%v is outside 0..%v, half of sidecar.ttl in whole seconds: a keepalive is sent every ttl/3, so a longer one would fail /readyz, and stop the app, while keepalives are answered in time; raise sidecar.ttl or make the app stop sooner", s.AppStopWithin, most)
	}
	return nil
}
