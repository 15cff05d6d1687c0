package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Coordinator manages pools, instances and seat claims under one prefix of
// one etcd cluster. It is safe for concurrent use. It caches each pool's
// last known state so that an uncontended claim is one transaction; the
// cache is only ever a hint, every decision is re-checked inside the txn.
type Coordinator struct {
	cli     *clientv3.Client
	k       keys
	log     *slog.Logger
	metrics Metrics
	opts    options

	mu     sync.Mutex
	states map[string]*sharedState
	feeds  map[string]*poolFeed // pools this process follows (feed.go)

	// txnLimit is chainLimit's, once etcd refused a chain of grants; 0
	// until then (grant.go).
	txnLimit atomic.Int64
	// handoffOps is the count of the smallest release txn with a hand-off
	// that etcd refused as too many operations; 0 until then (handoff.go).
	handoffOps atomic.Int64
	// loadBatch is how many instances an InstanceLoads txn reads, once
	// etcd refused more as too many operations; 0 until then (load.go).
	loadBatch atomic.Int64

	ctx    context.Context // cancelled by Close; parent of background work
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool // under mu; no background work starts after Close
}

// New returns a Coordinator using cli. An invalid option is an error.
func New(cli *clientv3.Client, opts ...Option) (*Coordinator, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil etcd client", ErrInvalid)
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cli: cli, k: keys{root: o.prefix}, log: o.logger, metrics: o.metrics, opts: o,
		states: map[string]*sharedState{}, feeds: map[string]*poolFeed{}, ctx: ctx, cancel: cancel,
	}, nil
}

// Client returns the etcd client.
func (c *Coordinator) Client() *clientv3.Client { return c.cli }

// Prefix returns the root prefix.
func (c *Coordinator) Prefix() string { return c.k.root }

// Close stops background work and waits for it. It does not release
// seats: they stay bound to their sessions. Claims whose Done is being
// watched see it close with ErrClosed: the seat may still be held, but
// nothing watches it any more. Cleanup of claims whose outcome was unknown
// (see doc.go) stops too; close the sessions they used to be sure nothing
// of theirs survives. It is idempotent.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	c.stopLingeringLocked()
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// goBackground runs f with the Coordinator's lifetime context; Close waits.
// It reports false, and runs nothing, once Close has begun.
func (c *Coordinator) goBackground(f func(ctx context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(c.ctx)
	}()
	return true
}

// cleanupCtx bounds a write made on behalf of a caller whose ctx is done.
func (c *Coordinator) cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, c.opts.timeout)
}

// getPool reads the whole pool prefix in one request.
func (c *Coordinator) getPool(ctx context.Context, pool string) (*clientv3.GetResponse, error) {
	return c.cli.Get(ctx, c.k.pool(pool), clientv3.WithPrefix())
}
