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
