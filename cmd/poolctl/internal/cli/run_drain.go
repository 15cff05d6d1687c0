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

// start follows the drain state of cl's instance (Claim.DrainState)
// until stop; grp receives --drain-signal.
func (d *drainNotice) start(cl *coordinator.Claim, grp *group) {
	if d.file == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel, d.done = cancel, make(chan struct{})
	go func() {
		defer close(d.done)
		d.follow(ctx, cl, grp)
	}()
}

// follow keeps the drain file in step with the instance's state.
func (d *drainNotice) follow(ctx context.Context, cl *coordinator.Claim, grp *group) {
	draining := false
	for {
		now, changed := cl.DrainState()
		if now != draining {
			draining = now
			d.tell(now, grp)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// tell creates the drain file and sends --drain-signal when the instance
// starts draining, and removes the file when it is made ready again.
func (d *drainNotice) tell(draining bool, grp *group) {
	if !draining {
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

// stop ends the following and removes the drain file.
func (d *drainNotice) stop() {
	if d.cancel != nil {
		d.cancel()
		<-d.done
	}
	if d.dir != "" {
		_ = os.RemoveAll(d.dir)
	}
}
