package webui

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// coalesce is how long the hub gathers events before it reads the pools
// they touched again, so a burst of claims costs one read per pool.
const coalesce = 100 * time.Millisecond

// subBuffer is how many messages a page may fall behind before it is cut
// off; its browser reconnects and starts again from a snapshot.
const subBuffer = 256

// message is one server-sent event.
type message struct {
	event string // snapshot, change, pool
	data  []byte
}

// Hub follows the coordinator's event stream once for every open page.
type Hub struct {
	co      *coordinator.Coordinator
	pools   []string // nil: every pool
	timeout time.Duration
	log     *slog.Logger

	readMu sync.Mutex // orders snapshot reads against pool refreshes
	mu     sync.Mutex
	subs   map[chan message]struct{}
	closed bool
}

// NewHub returns a hub for pools (every pool when empty) on co. timeout
// bounds each read of a pool.
func NewHub(co *coordinator.Coordinator, pools []string, timeout time.Duration, log *slog.Logger) *Hub {
	return &Hub{co: co, pools: pools, timeout: timeout, log: log, subs: map[chan message]struct{}{}}
}

// Run follows the event stream until ctx ends or the Coordinator is
// closed, then ends every page's stream.
func (h *Hub) Run(ctx context.Context) {
	defer h.closeAll()
	watch := ""
	if len(h.pools) == 1 {
		watch = h.pools[0]
	}
	events := h.co.Watch(ctx, watch)
	dirty := map[string]bool{}
	all := false
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Type == coordinator.EventResync {
				all = true
			} else if !h.included(ev.Pool) {
				continue
			} else {
				h.broadcast("change", ev)
				dirty[ev.Pool] = true
			}
			timer.Reset(coalesce)
		case <-timer.C:
			h.refresh(ctx, dirty, all)
			dirty, all = map[string]bool{}, false
		}
	}
}

func (h *Hub) included(pool string) bool {
	return len(h.pools) == 0 || slices.Contains(h.pools, pool)
}

// refresh reads the dirty pools (every pool if all) and sends their views,
// if any page is open.
func (h *Hub) refresh(ctx context.Context, dirty map[string]bool, all bool) {
	h.readMu.Lock()
	defer h.readMu.Unlock()
	if h.subscribers() == 0 {
		return
	}
	if all {
		snap := h.snapshot(ctx)
		h.broadcast("snapshot", snap)
		return
	}
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range dirty {
			if !yield(p) {
				return
			}
		}
	}) {
		rctx, cancel := context.WithTimeout(ctx, h.timeout)
		h.broadcast("pool", readPool(rctx, h.co, p))
		cancel()
	}
}

// snapshot reads every pool the hub shows.
func (h *Hub) snapshot(ctx context.Context) Snapshot {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	snap := Snapshot{Pools: []PoolView{}}
	pools, err := h.co.ListPools(ctx)
	if err != nil {
		h.log.Warn("web view: cannot list pools", "err", err)
		return snap
	}
	for _, p := range pools {
		if h.included(p.Name) {
			snap.Pools = append(snap.Pools, readPool(ctx, h.co, p.Name))
		}
	}
	return snap
}

// subscribe registers a page and returns its channel, starting with a
// snapshot of every pool. It returns nil once the hub has stopped. Every
// pool view sent after the snapshot was read after it.
func (h *Hub) subscribe(ctx context.Context) chan message {
	h.readMu.Lock()
	defer h.readMu.Unlock()
	snap := encode("snapshot", h.snapshot(ctx))
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	ch := make(chan message, subBuffer)
	ch <- snap
	h.subs[ch] = struct{}{}
	return ch
}

// unsubscribe forgets a page that went away.
func (h *Hub) unsubscribe(ch chan message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[ch]; ok {
		delete(h.subs, ch)
		close(ch)
	}
}

func (h *Hub) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// broadcast sends v to every page; a page that is too far behind is cut
// off (its browser reconnects and gets a snapshot).
func (h *Hub) broadcast(event string, v any) {
	m := encode(event, v)
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- m:
		default:
			delete(h.subs, ch)
			close(ch)
		}
	}
}

func (h *Hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for ch := range h.subs {
		delete(h.subs, ch)
		close(ch)
	}
}

func encode(event string, v any) message {
	b, err := json.Marshal(v)
	if err != nil { // the views are plain data; this does not happen
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return message{event: event, data: b}
}
