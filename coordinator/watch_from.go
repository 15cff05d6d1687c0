package coordinator

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchFrom streams the events of one pool, or of every pool when pool is
// "", with a revision above after. Unlike Watch, it never skips ahead on
// its own: when the watch breaks (a lost leader, a closed stream) it
// resumes after the last revision it delivered. Only when etcd has
// compacted revisions it still needed does it send EventResync, whose
// Revision is the compact revision: the events from after+1 (or the
// revision after the last one delivered) up to Revision-1 are missing, and
// the stream continues from Revision. after == 0 starts at the current
// revision, like Watch: it reads once before it returns, so every change
// committed after it returns is delivered (if that read fails, the stream
// starts at the revision of the first read that succeeds).
//
// It is meant for consumers that must not miss events silently (an audit
// log that resumes after a restart). The channel is closed when ctx ends
// or the Coordinator is closed. A pool name that ValidateName rejects
// yields a closed channel.
func (c *Coordinator) WatchFrom(ctx context.Context, pool string, after int64) <-chan Event {
	out := make(chan Event, 64)
	prefix := c.k.pools()
	if pool != "" {
		if ValidateName(pool) != nil {
			close(out)
			return out
		}
		prefix = c.k.pool(pool)
	}
	if after == 0 {
		gctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
		if resp, err := c.cli.Get(gctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
			after = resp.Header.Revision
		}
		cancel()
	}
	started := c.goBackground(func(bctx context.Context) {
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(bctx, cancel)
		defer stop()
		c.streamFrom(ctx, prefix, after, out)
	})
	if !started {
		close(out) // the Coordinator is closed
	}
	return out
}

func (c *Coordinator) streamFrom(ctx context.Context, prefix string, after int64, out chan<- Event) {
	send := func(ev Event) bool {
		ev.Time = time.Now().UTC()
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	for after == 0 && ctx.Err() == nil {
		resp, err := c.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			pause()
			continue
		}
		after = resp.Header.Revision
	}
	for ctx.Err() == nil {
		var compacted bool
		after, compacted = c.watchOnce(ctx, prefix, after, send)
		if !compacted {
			pause()
		}
	}
}

// watchOnce watches from after+1 until the watch breaks or ctx ends, and
// returns the revision to resume after and whether it was compacted.
func (c *Coordinator) watchOnce(ctx context.Context, prefix string, after int64, send func(Event) bool) (int64, bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a broken watch is cancelled, not left registered
	wch := c.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(),
		clientv3.WithRev(after+1), clientv3.WithPrevKV())
	for wr := range wch {
		if wr.CompactRevision > after+1 {
			send(Event{Type: EventResync, Seat: -1, Revision: wr.CompactRevision})
			return wr.CompactRevision - 1, true
		}
		if wr.Err() != nil {
			return after, false
		}
		for _, ev := range c.translate(wr.Events) {
			if !send(ev) {
				return after, false
			}
		}
		if n := len(wr.Events); n > 0 {
			after = wr.Events[n-1].Kv.ModRevision
		}
	}
	return after, false
}
