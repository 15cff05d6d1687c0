package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// -w/--watch on status, seats and queue: print the view, then print it
// again after every change. The coordinator's event stream says when
// something changed; nothing polls etcd. On a terminal, table output is
// redrawn in place; anywhere else each change prints a new table after a
// "---" line, and -o json/yaml print one document per change.

// frame renders one snapshot at a time now: ages count to now, the rest is
// as read.
type frame func(now time.Time) Result

// fetchFunc reads one snapshot of a view.
type fetchFunc func(ctx context.Context, c *coordinator.Coordinator) (frame, error)

// Timing of -w. Events that arrive within settle of each other cause one
// read; on a terminal, ages are redrawn every tick (no read).
const (
	refreshSettle = 100 * time.Millisecond
	refreshTick   = time.Second
)

// addWatchFlag adds -w/--watch to a view command.
func addWatchFlag(cmd *cobra.Command, watch *bool) {
	cmd.Flags().BoolVarP(watch, "watch", "w", false,
		"after printing, print again after every change until interrupted; redraws in place on a terminal")
}

// view prints what fetch reads: once, or with watch after every change in
// pool ("" for every pool) until ctx ends.
func (g *globalOptions) view(ctx context.Context, watch bool, pool string, fetch fetchFunc) error {
	if !watch {
		return g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
			f, err := fetch(ctx, c)
			if err != nil {
				return err
			}
			return g.printer().Print(f(g.env.Now()))
		})
	}
	c, done, err := g.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := (&watchOptions{g: g, Pool: pool}).checkPool(ctx, c); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := c.Watch(wctx, pool) // before the first read, so no change falls in between
	conns, stopConns := watchConnection(wctx, c.Client())
	defer stopConns()
	r := &refresher{g: g, c: c, fetch: fetch, out: newRefreshOut(g)}
	err = r.loop(wctx, events, conns)
	if ctx.Err() != nil {
		return nil // interrupted: the normal end of -w
	}
	return err
}

// refresher is one -w run.
type refresher struct {
	g     *globalOptions
	c     *coordinator.Coordinator
	fetch fetchFunc
	out   *refreshOut

	last frame // the latest snapshot, nil before the first
}

// loop reads and prints, then again after each burst of events.
func (r *refresher) loop(ctx context.Context, events <-chan coordinator.Event, conns <-chan connChange) error {
	if err := r.refresh(ctx, 0); err != nil {
		return err
	}
	tick := time.NewTicker(refreshTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return errors.New("the event stream ended")
			}
			rev := r.settle(ctx, events, ev.Revision)
			if err := r.refresh(ctx, rev); err != nil {
				return err
			}
		case ch, ok := <-conns:
			if !ok {
				conns = nil
				continue
			}
			if err := r.connChanged(ctx, ch); err != nil {
				return err
			}
		case <-tick.C:
			if r.last != nil {
				r.out.redraw(r.last(r.g.env.Now()))
			}
		}
	}
}

// settle collects the events that follow within refreshSettle and returns
// the latest revision seen.
func (r *refresher) settle(ctx context.Context, events <-chan coordinator.Event, rev int64) int64 {
	t := time.NewTimer(refreshSettle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return rev
		case <-t.C:
			return rev
		case ev, ok := <-events:
			if !ok {
				return rev
			}
			rev = max(rev, ev.Revision)
		}
	}
}

// refresh reads a snapshot and prints it. A read that fails for a reason
// that may pass (etcd unreachable) is reported and the view kept; a pool
// that is gone or a read that is denied ends the watch.
func (r *refresher) refresh(ctx context.Context, rev int64) error {
	rctx, cancel := r.g.withTimeout(ctx)
	f, err := r.fetch(rctx, r.c)
	err = timeoutErr(rctx, err)
	cancel()
	switch {
	case err == nil:
		r.last = f
		r.out.clear()
		return r.out.show(f(r.g.env.Now()), rev)
	case ctx.Err() != nil:
		return nil
	case ExitCode(err) == ExitUnreachable:
		r.out.setProblem("refresh failed: " + Message(err))
		return nil
	}
	return err
}

// connChanged reports a lost or restored connection and reads again once
// it is back: the TTLs left have moved meanwhile.
func (r *refresher) connChanged(ctx context.Context, ch connChange) error {
	if !ch.Up {
		r.out.setProblem(fmt.Sprintf("connection to etcd lost (%s) at %s; the view is as of before",
			ch.State, r.g.env.Now().Format(time.TimeOnly)))
		return nil
	}
	r.out.note("connection to etcd restored")
	return r.refresh(ctx, 0)
}
