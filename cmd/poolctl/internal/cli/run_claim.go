package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/etcdpool/etcdpool/coordinator"
)

// claim takes a seat, waiting as --wait and --no-wait say. A signal or the
// end of --wait gives the context's cause (interrupted, or no seat within
// --wait) rather than a bare context error.
func (o *runOptions) claim(ctx context.Context, c *coordinator.Coordinator, sess *coordinator.Session) (*coordinator.Claim, error) {
	opts := []coordinator.ClaimOption{}
	if !o.NoWait {
		opts = append(opts, coordinator.WithWait())
	}
	if o.Holder != "" {
		opts = append(opts, coordinator.WithHolder(o.Holder))
	}
	if o.Tenant != "" {
		opts = append(opts, coordinator.WithTenant(o.Tenant))
	}
	if o.Instance != "" {
		opts = append(opts, coordinator.WithInstance(o.Instance))
	}
	if len(o.labels) > 0 {
		opts = append(opts, coordinator.WithLabels(o.labels))
	}
	signals := ctx // cancelled by a signal only
	if o.Wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.Wait,
			classify(errWaitTimedOut, fmt.Errorf("no seat in pool %q within --wait %v", o.Pool, o.Wait)))
		defer cancel()
	}
	o.logf("waiting for a seat in pool %q", o.Pool)
	var last *coordinator.WaitStatus // the claim's goroutine writes it, and is done before it is read
	opts = append(opts, coordinator.WithWaitStatus(func(st coordinator.WaitStatus) {
		last = &st
		o.logf("waiting for a seat in pool %q: %s", o.Pool, st)
	}))
	cl, err := c.Claim(ctx, sess, o.Pool, opts...)
	if err == nil && signals.Err() != nil {
		o.release(cl) // a signal arrived just as the seat was granted
		err = signals.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, stillWaiting(context.Cause(ctx), last)
		}
		return nil, err
	}
	in, _ := cl.Instance()
	o.logf("holding seat %d of pool %q (token %d, instance %s)", cl.Seat(), cl.Pool(), cl.Token(), dash(in.ID))
	return cl, nil
}

// release gives the seat back, fenced by its token.
func (o *runOptions) release(cl *coordinator.Claim) {
	ctx, cancel := context.WithTimeout(context.Background(), o.g.CommandTimeout)
	defer cancel()
	if err := cl.Release(ctx); err != nil {
		o.logf("warning: release seat %d of pool %q: %s", cl.Seat(), cl.Pool(), Message(err))
		return
	}
	o.logf("released seat %d of pool %q", cl.Seat(), cl.Pool())
}

// stillWaiting adds why the claim was still waiting to the error of a
// wait that ran out.
func stillWaiting(err error, last *coordinator.WaitStatus) error {
	if last == nil || !errors.Is(err, errWaitTimedOut) {
		return err
	}
	return classify(errWaitTimedOut, fmt.Errorf("%w; still waiting: %s", err, last))
}
