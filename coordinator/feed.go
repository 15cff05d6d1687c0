package coordinator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The pool feed. While claimants of this process wait on a pool, or hold
// seats of a pool of at most maxFedHolders seats (keepFeed), and for
// feedLinger after the last of them is done, one goroutine keeps the
// pool's shared state exact: a watch opened at the
// current revision, then a read, then every event of the watch after the
// read's revision; and the same again when the watch breaks (never
// resuming at a past revision; see openFeed). The head of the queue and
// pre-waiters look at it after each change (under its lock, without a
// copy; the head copies it only to plan a claim txn), so a new head, or a
// second waiter in the same process, starts without reading the pool, and
// a holder's release can hand its seat to the first waiter (handoff.go).
// Other waiters do not wake on it: each watches only the waiter ahead and
// its own queue key.

// poolFeed is the feed of one pool; its fields other than refs are guarded
// by the shared state's mutex.
type poolFeed struct {
	sh      *sharedState
	refs    int // under Coordinator.mu
	cancel  context.CancelFunc
	err     error                 // a permanent error that stops the feed (permission denied)
	synced  bool                  // the state is exact: loaded and being watched
	changed chan struct{}         // closed, and replaced, at each change
	subs    map[string][]*feedSub // key -> waiters to wake when it changes
	idle    *time.Timer           // under Coordinator.mu: stops the feed nobody uses (feedLinger)
}

// acquireFeed returns the pool's feed, starting it for the first user.
// Call release when done. A feed that a permanent error stopped is not
// handed out again: the cause may be gone (a role's permission restored),
// and holders keep their refs to it for as long as their claims last
// (keepFeed), so it would fail every later waiter with the old error. A
// new feed starts in its place; if etcd still refuses, its first RPC says
// so (TestFailedFeedNotReused).
func (c *Coordinator) acquireFeed(pool string) (*poolFeed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("%w: coordinator", ErrClosed)
	}
	f, ok := c.feeds[pool]
	if ok && f.failed() {
		c.keepLingeringLocked(f)
		c.stopFeedLocked(pool, f) // its users drop their refs to it as they end
		ok = false
	}
	if ok {
		c.keepLingeringLocked(f)
	} else {
		ctx, cancel := context.WithCancel(c.ctx)
		f = &poolFeed{sh: c.sharedLocked(pool), cancel: cancel, changed: make(chan struct{}), subs: map[string][]*feedSub{}}
		f.sh.mu.Lock()
		f.sh.fed = f
		f.sh.mu.Unlock()
		c.feeds[pool] = f
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.runFeed(ctx, pool, f)
		}()
	}
	f.refs++
	return f, nil
}

// maxFedHolders is the largest capacity of a pool whose holders keep its
// feed (keepFeed). Each feed receives every change of the pool, so the
// feeds of holders cost etcd up to this many watch events per change.
const maxFedHolders = 64

// feedLinger is how long a feed runs on after its last user is done, so
// that a process that claims and releases in a loop, or waits again soon,
// neither reads the whole pool nor opens a watch each time.
const feedLinger = 2 * time.Second

// keepFeed makes cl, a claim just granted in a pool of at most
// maxFedHolders seats, keep the pool's feed running, starting it if this
// process has none, until the claim ends (Claim.lose). Its release can
// then hand the seat to the first waiter in the same txn (handoff.go),
// whichever process that waiter is in. A feed this starts is not exact at
// once: it reads the pool and opens its watch in the background, so the
// claim returns without waiting for it, and a release before it is synced
// frees the seat alone.
func (c *Coordinator) keepFeed(cl *Claim) {
	sh := c.shared(cl.pool)
	sh.mu.Lock()
	small := sh.st.specKV != nil && sh.st.spec.Capacity <= maxFedHolders
	sh.mu.Unlock()
	if !small {
		return
	}
	f, err := c.acquireFeed(cl.pool)
	if err != nil {
		return // closed
	}
	cl.mu.Lock()
	kept := cl.err == nil // not lost already: something to hand off
	if kept {
		cl.feed = f
	}
	cl.mu.Unlock()
	if !kept {
		c.releaseFeed(cl.pool, f)
	}
}

// releaseFeed drops one user. After the last one the feed runs on for
// feedLinger, unless it has failed or the Coordinator is closing.
func (c *Coordinator) releaseFeed(pool string, f *poolFeed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.refs--; f.refs > 0 {
		return
	}
	if c.closed || f.failed() {
		c.stopFeedLocked(pool, f)
		return
	}
	var t *time.Timer
	c.wg.Add(1) // Close stops the timer, or waits for it
	t = time.AfterFunc(feedLinger, func() {
		defer c.wg.Done()
		c.mu.Lock()
		defer c.mu.Unlock()
		if f.idle == t { // not taken up again meanwhile
			f.idle = nil
			c.stopFeedLocked(pool, f)
		}
	})
	f.idle = t
}

// keepLingeringLocked stops f's idle timer, if set: a user is back.
func (c *Coordinator) keepLingeringLocked(f *poolFeed) {
	if f.idle == nil {
		return
	}
	if f.idle.Stop() {
		c.wg.Done() // it will not run
	}
	f.idle = nil
}

// stopFeedLocked stops f, under c.mu: nobody uses it, or it failed and a
// new feed may have taken its place.
func (c *Coordinator) stopFeedLocked(pool string, f *poolFeed) {
	f.cancel()
	if c.feeds[pool] == f {
		delete(c.feeds, pool)
	}
	f.sh.mu.Lock()
	if f.sh.fed == f {
		f.sh.fed = nil
	}
	f.sh.mu.Unlock()
}

// stopLingeringLocked stops, under c.mu, every feed that nobody uses; for
// Close, which must not wait feedLinger for them.
func (c *Coordinator) stopLingeringLocked() {
	for pool, f := range c.feeds {
		if f.idle != nil {
			c.keepLingeringLocked(f)
			c.stopFeedLocked(pool, f)
		}
	}
}

// failed reports whether a permanent error stopped the feed.
func (f *poolFeed) failed() bool {
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	return f.err != nil
}

// fail stops the feed's users with a permanent error; the first one stays.
func (f *poolFeed) fail(err error) {
	f.update(false, nil, func(*poolState) {
		if f.err == nil {
			f.err = err
		}
	})
}

// await runs fn on the exact state, under its lock, once the feed is
// synced and has caught up with revision minRev; it waits for that, for ctx
// or for the session. It returns the channel that the next change closes.
func (f *poolFeed) await(ctx context.Context, s *Session, minRev int64, fn func(*poolState)) (<-chan struct{}, error) {
	for {
		f.sh.mu.Lock()
		ok, changed, ferr := f.synced && f.sh.st.rev >= minRev, f.changed, f.err
		if ok && ferr == nil {
			fn(f.sh.st)
		}
		f.sh.mu.Unlock()
		if ferr != nil {
			return nil, ferr
		}
		if ok {
			return changed, nil
		}
		if err := waitOn(ctx, s, changed); err != nil {
			return nil, err
		}
	}
}

// feedSub is a waiter's interest in a few keys; it fires once.
type feedSub struct {
	keys []string
	ch   chan struct{}
	once sync.Once
}

func (sub *feedSub) fire() { sub.once.Do(func() { close(sub.ch) }) }

// subscribe registers interest in keys, under the state's lock (from an
// await callback): the sub fires when the feed applies a change to any of
// them, or reloads.
func (f *poolFeed) subscribe(keys ...string) *feedSub {
	sub := &feedSub{keys: keys, ch: make(chan struct{})}
	for _, k := range keys {
		f.subs[k] = append(f.subs[k], sub)
	}
	return sub
}

// sleep waits for sub to fire, ctx or the session, then unregisters it.
func (f *poolFeed) sleep(ctx context.Context, s *Session, sub *feedSub) error {
	err := waitOn(ctx, s, sub.ch)
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	for _, k := range sub.keys {
		f.subs[k] = slices.DeleteFunc(f.subs[k], func(x *feedSub) bool { return x == sub })
		if len(f.subs[k]) == 0 {
			delete(f.subs, k)
		}
	}
	return err
}

// waitOn waits for ch to close, ctx to end or the session to end.
func waitOn(ctx context.Context, s *Session, ch <-chan struct{}) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.Done():
		return s.lostErr()
	case <-ch:
		return nil
	}
}

// update changes the shared state under its lock and wakes the feed's
// users: those waiting on any change, and the subscribers of the keys that
// changed (evs), or every subscriber when the state was reloaded (evs nil).
func (f *poolFeed) update(synced bool, evs []*clientv3.Event, change func(*poolState)) {
	f.sh.mu.Lock()
	defer f.sh.mu.Unlock()
	if change != nil {
		change(f.sh.st)
	}
	f.synced = synced
	f.poke()
	if evs == nil {
		for k, subs := range f.subs {
			for _, sub := range subs {
				sub.fire()
			}
			delete(f.subs, k)
		}
		return
	}
	for _, ev := range evs {
		for _, sub := range f.subs[string(ev.Kv.Key)] {
			sub.fire()
		}
	}
}

// poke wakes the feed's users that wait on any change, as a change does,
// when none came: something they look at besides the pool changed (a
// held-back waiter's turn, heldback.go). Under the shared state's lock.
func (f *poolFeed) poke() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// owned returns change, to run only while f is the pool's current feed: a
// stopped feed changes the state no more, since a later feed or the claim
// path's probes own it now. It still wakes its own users.
func (f *poolFeed) owned(change func(*poolState)) func(*poolState) {
	return func(st *poolState) {
		if f.sh.fed == f {
			change(st)
		}
	}
}

func (c *Coordinator) runFeed(ctx context.Context, pool string, f *poolFeed) {
	// Ended by its last user leaving (nobody to tell) or by Close: its
	// users, if any, must not wait for a feed that is gone.
	defer f.fail(fmt.Errorf("%w: coordinator closed while waiting on pool %q", ErrClosed, pool))
	for b := waitRetry.Backoff(); ctx.Err() == nil; {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		op := RetryFeedWatch
		events, err := c.openFeed(wctx, pool)
		var resp *clientv3.GetResponse
		if err == nil {
			op = RetryFeedRead
			resp, err = c.getPool(ctx, pool)
		}
		if err == nil {
			b.Reset()
			f.update(true, nil, f.owned(func(st *poolState) { st.load(resp.Header.Revision, resp.Kvs) }))
			op, err = "", c.followFeed(pool, f, events)
			f.update(false, nil, nil)
		}
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case etcdclient.IsPermanent(err):
			f.fail(fmt.Errorf("coordinator: follow pool %q (%s): %w", pool, c.k.pool(pool), err))
			return
		case op == "":
			c.retried(pool, RetryFeedWatch, 0, err) // a watch that broke is re-opened at once
		default:
			c.pause(ctx, nil, b, pool, op, err)
		}
	}
}

// openFeed opens the feed's watch at the current revision and returns once
// etcd has registered it, so that the read that follows misses nothing:
// every change after that read is an event of this watch (apply skips the
// events the read already holds). The watch is opened first, rather than
// from the read's revision, because etcd serves a watch that starts at a
// past revision from its unsynced loop, which runs every 100 ms
// (watchResyncPeriod): a write that falls between the read and the watch,
// such as the waiter's own queue key, would reach the feed up to 100 ms
// late, and the seat it could take would sit idle meanwhile.
func (c *Coordinator) openFeed(ctx context.Context, pool string) (clientv3.WatchChan, error) {
	events := c.cli.Watch(ctx, c.k.pool(pool), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	wr, ok := <-events
	switch {
	case !ok && ctx.Err() != nil:
		return nil, fmt.Errorf("coordinator: watch pool %q: %w", pool, context.Cause(ctx))
	case !ok:
		return nil, fmt.Errorf("coordinator: watch pool %q: the watch closed before etcd registered it", pool)
	}
	return events, etcdclient.WatchErr(wr)
}

// followFeed applies watch events until the watch breaks, and returns why
// it broke.
func (c *Coordinator) followFeed(pool string, f *poolFeed, events clientv3.WatchChan) error {
	for wr := range events {
		if err := etcdclient.WatchErr(wr); err != nil {
			return err
		}
		f.update(true, wr.Events, f.owned(func(st *poolState) { st.apply(wr.Events) }))
	}
	return fmt.Errorf("coordinator: watch pool %q closed", pool)
}
