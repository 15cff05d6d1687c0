package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/httpapi"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// Replicas that share a client's session: replica A reaches etcd through a
// fault-injecting proxy, replica B directly, both on the same prefix. The
// client keeps its session alive through B.

// replicaPair: replica A reaches etcd through a fault proxy, replica B
// directly; both serve the same prefix (anonymous, loopback).
func replicaPair(t *testing.T, opts ...httpapi.Option) (a, b *env, p *etcdtest.Proxy) {
	t.Helper()
	prefix := fmt.Sprintf("/httpapi-test/rt%d", prefixSeq.Add(1))
	p = etcdtest.NewProxy(t, shared.Endpoint())
	mk := func(cli *clientv3.Client) *env {
		co, err := coordinator.New(cli, coordinator.WithPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := httpapi.New(co, nil, append([]httpapi.Option{httpapi.WithAnonymous()}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(func() { hs.CloseClientConnections(); hs.Close(); srv.Close(); co.Close() })
		return &env{t: t, co: co, cli: cli, srv: srv, url: hs.URL, hc: hs.Client()}
	}
	return mk(testkit.Client(t, p.URL())), mk(newClient(t)), p
}

// keepAliveVia renews session s through e every second until the test ends.
func keepAliveVia(t *testing.T, e *env, s string) {
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			r, err := e.hc.Post(e.url+"/v1/sessions/"+s+"/keepalive", "application/json", nil)
			if err == nil {
				r.Body.Close()
			}
		}
	}()
}

// TestStreamOnCutOffReplicaSaysClosed: replica A loses etcd while the
// client keeps its session alive through B. A's copy of the session
// passes its local deadline, but the lease, and the seat, live on: A's
// loss stream must say "closed" (reconnect), not "lost". Found by a review
// (2026-12-05): it said "lost", reason expired, and a client that believed
// it left its seat held, unknown to it, for as long as it kept its session.
func TestStreamOnCutOffReplicaSaysClosed(t *testing.T) {
	a, b, p := replicaPair(t)
	b.createPool("p", coordinator.PoolSpec{Capacity: 1})
	s := b.session("", 5)
	keepAliveVia(t, b, s)
	c := b.claim("", "p", map[string]any{"session": s}).want(t, "claim via B", 201, "")
	rd := a.openStream(t, streamPath("p", c, s), "")
	if ev, _ := sseEvent(t, rd); ev != "held" {
		t.Fatalf("first event %q", ev)
	}
	p.Blackhole()
	ev, data := sseEvent(t, rd)
	st, err := b.co.Seat(context.Background(), "p", int(c.num("seat")))
	if err != nil || st.Token != c.num("token") {
		t.Fatalf("etcd via B: seat %+v, %v; want it still held", st, err)
	}
	if ev != "closed" || !strings.Contains(data, httpapi.ReasonServerCutOff) {
		t.Errorf("stream on A said %q %s; want closed (%s): the seat is still held", ev, data, httpapi.ReasonServerCutOff)
	}
}

// TestAmbiguousClaimOnCutOffReplicaReaped: a claim through replica A
// commits in etcd, but A never gets the answer and answers 503 (retry).
// A's copy of the session passes its local deadline while the client keeps
// the lease alive through B. The seat the lost attempt took must be found
// and released once A reaches etcd again: the client, told to retry, holds
// only the seat it retried for. Found by a review (2026-12-05): A's cleanup
// ended with its copy of the session, and the seat stayed bound to the
// client's live session, unknown to it.
func TestAmbiguousClaimOnCutOffReplicaReaped(t *testing.T) {
	a, b, p := replicaPair(t, httpapi.WithRequestTimeout(2*time.Second))
	b.createPool("p", coordinator.PoolSpec{Capacity: 5})
	s := b.session("", 5)
	keepAliveVia(t, b, s)
	w := a.claim("", "p", map[string]any{"session": s}).want(t, "warm claim via A (A borrows the lease)", 201, "")
	a.do("DELETE", releasePath("p", w.num("seat"), w.num("token"), s), "", nil).want(t, "warm release", 204, "")
	p.DropResponses()
	if r := a.claim("", "p", map[string]any{"session": s}); r.status == 201 {
		t.Fatalf("claim via A with its answers dropped: %d %s", r.status, r.raw)
	}
	time.Sleep(6 * time.Second) // A's copy of the session passes its local deadline
	p.Restore()
	known := b.claim("", "p", map[string]any{"session": s}).want(t, "retry via B", 201, "")
	lease := strings.SplitN(s, ".", 2)[0]
	mine := func() []string {
		var out []string
		for _, x := range b.do("GET", "/v1/pools/p/seats", "", nil).list {
			if m := x.(map[string]any); m["lease"] == lease {
				out = append(out, fmt.Sprintf("seat %v token %v", m["seat"], m["token"]))
			}
		}
		return out
	}
	testkit.Eventually(t, 20*time.Second, "only the retried seat bound to the session", func() bool { return len(mine()) == 1 })
	if got := mine(); len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("token %d", known.num("token"))) {
		t.Errorf("seats of the session: %v; want only token %d", got, known.num("token"))
	}
}

// TestWaiterOnCutOffReplicaLeavesNoGhost: a claim waits through replica A;
// A loses etcd past its copy of the session's local deadline while the
// client keeps the lease alive through B. The queue entry A's wait left
// must go once A reaches etcd again; else it stands in line, takes the
// next seat freed, which nobody hears of, and blocks the pool until the
// session ends. Found by a review (2026-12-05): A skipped the entry's
// removal ("it goes with the lease"), and another client's claim was
// refused (pool full) after the waiter had been answered.
func TestWaiterOnCutOffReplicaLeavesNoGhost(t *testing.T) {
	a, b, p := replicaPair(t)
	b.createPool("p", coordinator.PoolSpec{Capacity: 1})
	sx := b.session("", 30)
	x := b.claim("", "p", map[string]any{"session": sx}).want(t, "X claims", 201, "")
	s := b.session("", 5)
	keepAliveVia(t, b, s)
	a.do("POST", "/v1/sessions/"+s+"/keepalive", "", nil).want(t, "A knows the session", 200, "")
	got := make(chan int, 1)
	go func() {
		status := -1
		r, err := a.hc.Post(a.url+"/v1/pools/p/claims", "application/json", strings.NewReader(fmt.Sprintf(`{"session":%q,"wait":20}`, s)))
		if err == nil {
			status = r.StatusCode
			r.Body.Close()
		}
		got <- status
	}()
	testkit.Eventually(t, 5*time.Second, "waiter queued", func() bool {
		return len(b.do("GET", "/v1/pools/p/queue", "", nil).list) == 1
	})
	p.Blackhole()
	time.Sleep(6 * time.Second) // A's copy of the session passes its local deadline
	p.Restore()
	b.do("DELETE", releasePath("p", x.num("seat"), x.num("token"), sx), "", nil).want(t, "X releases", 204, "")
	var status int
	select {
	case status = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting claim was not answered")
	}
	if status == 201 {
		return // granted: the seat it holds is the one it was told of
	}
	lease := strings.SplitN(s, ".", 2)[0]
	testkit.Eventually(t, 20*time.Second, "nothing of the session left in the pool", func() bool {
		for _, path := range []string{"/v1/pools/p/queue", "/v1/pools/p/seats"} {
			for _, x := range b.do("GET", path, "", nil).list {
				if x.(map[string]any)["lease"] == lease {
					return false
				}
			}
		}
		return true
	})
}

// TestClaimOnEndingLeaseIsNotGone: a claim on a session whose lease has
// less than a second left (etcd says 0), which the client then renews, is
// 503 (renew, retry), not 410 session_gone. Found by a review
// (2026-12-05): both the borrow (no more than the margin left) and the
// check of whether the lease lives (TTL > 0) took it for gone.
func TestClaimOnEndingLeaseIsNotGone(t *testing.T) {
	e := newEnv(t, nil)
	e.createPool("p", coordinator.PoolSpec{Capacity: 1})
	s := e.session("", 5)
	time.Sleep(4200 * time.Millisecond) // under 1 s left, not yet past
	r := e.claim("", "p", map[string]any{"session": s})
	e.do("POST", "/v1/sessions/"+s+"/keepalive", "", nil).want(t, "keepalive after the claim", 200, "")
	if r.status == 410 {
		t.Errorf("claim on a live session: %d %s; want 503 (or the seat)", r.status, r.raw)
	}
}

// TestStreamSaysLostWhenLeaseExpires: a client that stops renewing its
// session is told "lost", reason expired, not "closed": the replica's copy
// of the session ends at its local deadline, before etcd says the lease is
// gone, and the replica asks. Found by a review of 8fdcf28 (2026-12-05):
// every such expiry with a TTL of 12 s or more said server_cut_off.
func TestStreamSaysLostWhenLeaseExpires(t *testing.T) {
	e := newEnv(t, nil)
	e.createPool("p", coordinator.PoolSpec{Capacity: 1})
	s := e.session("", 12) // polled every 4 s: the local deadline (1.2 s before the end) comes first
	c := e.claim("", "p", map[string]any{"session": s}).want(t, "claim", 201, "")
	rd := e.openStream(t, streamPath("p", c, s), "")
	if ev, _ := sseEvent(t, rd); ev != "held" {
		t.Fatalf("first event %q", ev)
	}
	if ev, data := sseEvent(t, rd); ev != "lost" || !strings.Contains(data, `"expired"`) {
		t.Errorf("stream said %q %s; want lost, expired", ev, data)
	}
}

// After a session's lease expired, its release answers session_gone on
// every replica, the one that granted the seat (and remembers the
// session) included. Found by a review (2026-12-05): that one answered
// not_held, the others session_gone.
func TestReleaseAfterExpiryReplicasAgree(t *testing.T) {
	a, b, _ := replicaPair(t)
	a.createPool("p", coordinator.PoolSpec{Capacity: 2})
	s := a.session("", 2)
	c := a.claim("", "p", map[string]any{"session": s}).want(t, "claim via A", 201, "")
	testkit.Eventually(t, 10*time.Second, "the session's lease to expire, and its seat with it", func() bool {
		seats, err := a.co.Seats(context.Background(), "p")
		return err == nil && len(seats) == 0
	})
	path := releasePath("p", c.num("seat"), c.num("token"), s)
	b.do("DELETE", path, "", nil).want(t, "release via B", 410, "session_gone")
	a.do("DELETE", path, "", nil).want(t, "release via A, which granted the seat", 410, "session_gone")
}
