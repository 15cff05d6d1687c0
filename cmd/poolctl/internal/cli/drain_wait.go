package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// recheckInterval is how often waitIdle re-reads the seats without an
// event, in case the event stream ended.
const recheckInterval = time.Second

// waitIdle waits until no seat of the pool is bound to the instance. It
// re-reads the seats whenever the pool's event stream says something
// changed. It fails with errWaitTimedOut after --timeout, or with the
// signal that interrupted it.
func (o *drainOptions) waitIdle(ctx context.Context, c *coordinator.Coordinator) error {
	wctx := ctx
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	events := c.Watch(wctx, o.Pool) // reads once before it returns: no gap
	tick := time.NewTicker(recheckInterval)
	defer tick.Stop()
	held := 0
	for {
		n, err := o.held(wctx, c)
		switch {
		case err != nil && wctx.Err() == nil:
			return err
		case err == nil:
			held = n
		}
		if err == nil && n == 0 {
			return nil
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return context.Cause(ctx) // interrupted
			}
			return classify(errWaitTimedOut, fmt.Errorf("instance %q of pool %q still has %d held seat(s) after --timeout %v; it stays draining",
				o.Instance, o.Pool, held, o.Timeout))
		case _, ok := <-events:
			if !ok {
				events = nil // ended with wctx; the ticker covers the rest
			}
			drainEvents(events)
		case <-tick.C:
		}
	}
}

// drainEvents discards the events already queued: one re-read covers them.
func drainEvents(events <-chan coordinator.Event) {
	for events != nil {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// held counts the seats bound to the instance, within --command-timeout.
func (o *drainOptions) held(ctx context.Context, c *coordinator.Coordinator) (int, error) {
	ctx, cancel := o.g.withTimeout(ctx)
	defer cancel()
	seats, err := c.Seats(ctx, o.Pool)
	if err != nil {
		return 0, timeoutErr(ctx, err)
	}
	n := 0
	for _, s := range seats {
		if s.Instance == o.Instance {
			n++
		}
	}
	return n, nil
}
