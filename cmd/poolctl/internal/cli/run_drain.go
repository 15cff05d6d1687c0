package cli

import (
	"context"
	"os"
	"path/filepath"

	"github.com/etcdpool/etcdpool/coordinator"
)

// drainEnv is the variable that tells run's command where its drain file
// is: a path that exists while the instance of its seat is draining.
const drainEnv = "ETCDPOOL_DRAIN_FILE"

// drainNotice tells run's command that the instance its seat is bound to
// is draining: the drain file exists while it drains, and --drain-signal
// (if given) is sent to the command's process group each time it starts
// draining.
type drainNotice struct {
	o    *runOptions
	in   coordinator.Instance
	dir  string // private directory holding the file; "" for no instance
	file string

	cancel context.CancelFunc
	done   chan struct{}
}

// newDrainNotice prepares the drain file's directory for a seat bound to
// an instance; for an anonymous seat the file is "" and nothing watches.
func (o *runOptions) newDrainNotice(in coordinator.Instance) (*drainNotice, error) {
	d := &drainNotice{o: o, in: in}
	if in.ID == "" {
		return d, nil
	}
	dir, err := os.MkdirTemp("", "poolctl-drain-")
	if err != nil {
		return nil, err
	}
	d.dir, d.file = dir, filepath.Join(dir, "draining")
	return d, nil
}

// start watches the instance until stop; grp receives --drain-signal.
func (d *drainNotice) start(c *coordinator.Coordinator, pool string, grp *group) {
	if d.file == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan struct{})
	go func() { // Watch reads etcd before it returns: not on the way to watching the seat
		defer close(d.done)
		events := c.Watch(ctx, pool)
		d.follow(ctx, c, pool, events, grp) // follow reads the state after the watch opened: no gap
	}()
}

// follow keeps the drain file in step with the instance's state.
func (d *drainNotice) follow(ctx context.Context, c *coordinator.Coordinator, pool string, events <-chan coordinator.Event, grp *group) {
	draining := false
	set := func(now bool) {
		if now == draining {
			return
		}
		draining = now
		if !now {
			_ = os.Remove(d.file)
			return
		}
		if err := os.WriteFile(d.file, []byte(d.in.ID+"\n"), 0o644); err != nil {
			d.o.logf("warning: drain file: %v", err)
		}
		if d.o.drainSig != nil {
			grp.signal(d.o.drainSig)
		}
		d.o.logf("instance %q is draining; told the command (%s)", d.in.ID, drainEnv)
	}
	set(d.current(ctx, c, pool))
	for ev := range events {
		switch {
		case ev.Type == coordinator.EventResync:
			set(d.current(ctx, c, pool))
		case ev.Instance != d.in.ID:
		case ev.Type == coordinator.EventInstanceDraining:
			set(true)
		case ev.Type == coordinator.EventInstanceUp:
			set(false)
		}
	}
}

// current reads whether the instance is draining now (false if unknown).
func (d *drainNotice) current(ctx context.Context, c *coordinator.Coordinator, pool string) bool {
	ctx, cancel := d.o.g.withTimeout(ctx)
	defer cancel()
	all, _ := c.Instances(ctx, pool)
	for _, x := range all {
		if x.ID == d.in.ID {
			return x.State == coordinator.InstanceDraining
		}
	}
	return false
}

// stop ends the watch and removes the drain file.
func (d *drainNotice) stop() {
	if d.cancel != nil {
		d.cancel()
		<-d.done
	}
	if d.dir != "" {
		_ = os.RemoveAll(d.dir)
	}
}
