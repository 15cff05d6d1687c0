package coordinator

import "context"

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
	return c.startStream(ctx, pool, after, resume)
}
