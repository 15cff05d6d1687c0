package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/httpapi"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// The whole life of a session and a seat, with every status a holder can
// meet on the way: 201, 409 no_seat (with its reason), 412 stale_token,
// 204, 404 not_held, 200, 410 session_gone.
func TestSessionAndSeatLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	e.createPool("hearing", coordinator.PoolSpec{Capacity: 1})
	s := e.session("", 5)

	c := e.claim("", "hearing", map[string]any{"session": s, "holder": "judge"}).want(t, "claim", 201, "")
	if c.str("pool") != "hearing" || c.str("holder") != "judge" || c.num("token") <= 0 {
		t.Fatalf("claim answer %s", c.raw)
	}
	e.claim("", "hearing", map[string]any{"session": s}).want(t, "claim on a full pool", 409, "no_seat")
	if r := e.claim("", "hearing", map[string]any{"session": s}); r.str("reason") != string(coordinator.WaitPoolFull) {
		t.Fatalf("no_seat reason = %q, want %q", r.str("reason"), coordinator.WaitPoolFull)
	}
	seat, tok := c.num("seat"), c.num("token")
	e.do("DELETE", releasePath("hearing", seat, tok+1, s), "", nil).want(t, "release with a stale token", 412, "stale_token")
	e.do("POST", "/v1/sessions/"+s+"/keepalive", "", nil).want(t, "keepalive", 200, "")
	e.do("DELETE", releasePath("hearing", seat, tok, s), "", nil).want(t, "release", 204, "")
	e.do("DELETE", releasePath("hearing", seat, tok, s), "", nil).want(t, "second release", 404, "not_held")

	c2 := e.claim("", "hearing", map[string]any{"session": s}).want(t, "claim after release", 201, "")
	e.do("DELETE", "/v1/sessions/"+s, "", nil).want(t, "delete session", 204, "")
	if _, err := e.co.Seat(context.Background(), "hearing", int(c2.num("seat"))); err == nil {
		t.Fatal("deleting the session left its seat held")
	}
	e.do("POST", "/v1/sessions/"+s+"/keepalive", "", nil).want(t, "keepalive of a deleted session", 410, "session_gone")
	e.claim("", "hearing", map[string]any{"session": s}).want(t, "claim on a deleted session", 410, "session_gone")
	e.do("DELETE", "/v1/sessions/"+s, "", nil).want(t, "second delete", 410, "session_gone")
}

// Every malformed request is a 400 invalid_input, and an unknown pool,
// seat or path a 404.
func TestInvalidInputAndNotFound(t *testing.T) {
	e := newEnv(t, nil)
	e.createPool("p", coordinator.PoolSpec{Capacity: 1})
	s := e.session("", 5)
	bad := []struct {
		name, method, path string
		body               any
	}{
		{"not JSON", "POST", "/v1/sessions", "{"},
		{"unknown field", "POST", "/v1/sessions", `{"ttl":5,"color":"red"}`},
		{"trailing data", "POST", "/v1/sessions", `{"ttl":5}{}`},
		{"a stray brace after the object", "POST", "/v1/sessions", `{"ttl":5}}`},
		{"a stray bracket after the object", "POST", "/v1/sessions", `{"ttl":5}]`},
		{"ttl too short", "POST", "/v1/sessions", map[string]any{"ttl": 1}},
		{"malformed handle", "POST", "/v1/sessions/nope/keepalive", nil},
		{"claim without session", "POST", "/v1/pools/p/claims", map[string]any{}},
		{"negative wait", "POST", "/v1/pools/p/claims", map[string]any{"session": s, "wait": -1}},
		{"wait too long", "POST", "/v1/pools/p/claims", map[string]any{"session": s, "wait": 1e6}},
		{"bad tenant", "POST", "/v1/pools/p/claims", map[string]any{"session": s, "tenant": "a/b"}},
		{"bad pool name", "POST", "/v1/pools/a%20b/claims", map[string]any{"session": s}},
		{"a slash in a pool name", "POST", "/v1/pools/a%2Fb/claims", map[string]any{"session": s}}, // was 403 (a review, 2026-12-05)
		{"a slash in a pool name, reading", "GET", "/v1/pools/a%2Fb/seats", nil},
		{"seat not a number", "DELETE", "/v1/pools/p/seats/x?token=1&session=" + s, nil},
		{"no token", "DELETE", "/v1/pools/p/seats/0?session=" + s, nil},
		{"bad spec", "PUT", "/v1/pools/q", map[string]any{"capacity": 0}},
		{"force-release without reason", "POST", "/v1/pools/p/seats/0/force-release", map[string]any{"token": 5}},
		// Text for operators with control or bidi override characters
		// (a review, 2026-12-05: the API took them, and poolctl -o yaml
		// then failed for the whole pool).
		{"holder with a bidi override", "POST", "/v1/pools/p/claims", map[string]any{"session": s, "holder": "admin\u202egnp.exe"}},
		{"holder with a C1 control", "POST", "/v1/pools/p/claims", map[string]any{"session": s, "holder": "csi\u009b2J"}},
		{"label value with DEL", "POST", "/v1/pools/p/claims", map[string]any{"session": s, "labels": map[string]string{"zone": "a\u007f"}}},
		{"reason with ESC", "POST", "/v1/pools/p/seats/0/force-release", map[string]any{"token": 5, "reason": "x\u001b[2J"}},
	}
	for _, c := range bad {
		e.do(c.method, c.path, "", c.body).want(t, c.name, 400, "invalid_input")
	}
	e.claim("", "nosuch", map[string]any{"session": s}).want(t, "claim on a missing pool", 404, "not_found")
	e.do("GET", "/v1/pools/nosuch", "", nil).want(t, "missing pool", 404, "not_found")
	e.do("GET", "/v1/nowhere", "", nil).want(t, "unknown path", 404, "not_found")
	if r := e.do("GET", "/v1/openapi.json", "", nil).want(t, "openapi", 200, ""); r.raw != string(httpapi.OpenAPI) {
		t.Fatal("/v1/openapi.json does not serve the embedded document")
	}
	e.do("POST", "/v1/pools/p/seats/3/force-release", "", map[string]any{"token": 5, "reason": "x"}).want(t, "force-release a free seat", 404, "not_held")
}

// A claim that waits is granted when a seat frees, in line; one whose wait
// ends first gets 408 and leaves no place in the queue.
func TestClaimWait(t *testing.T) {
	e := newEnv(t, nil)
	e.createPool("p", coordinator.PoolSpec{Capacity: 1})
	s := e.session("", 5)
	held := e.claim("", "p", map[string]any{"session": s}).want(t, "claim", 201, "")

	e.claim("", "p", map[string]any{"session": s, "wait": 0.3}).want(t, "wait that ends first", 408, "wait_timeout")
	if q := e.do("GET", "/v1/pools/p/queue", "", nil).want(t, "queue", 200, ""); len(q.list) != 0 {
		t.Fatalf("a timed-out waiter stayed in the queue: %s", q.raw)
	}
	got := make(chan reply, 1)
	go func() { got <- e.claim("", "p", map[string]any{"session": s, "wait": 10}) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.do("GET", "/v1/pools/p/queue", "", nil).list) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never joined the queue")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.do("DELETE", releasePath("p", held.num("seat"), held.num("token"), s), "", nil).want(t, "release", 204, "")
	select {
	case r := <-got:
		r.want(t, "waiting claim", 201, "")
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not granted the freed seat")
	}
}

// sseEvent reads the next event of a stream.
func sseEvent(t *testing.T, rd *bufio.Reader) (event, data string) {
	t.Helper()
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && event != "":
			return event, data
		}
	}
}

// openStream opens an event stream as token's principal.
func (e *env) openStream(t *testing.T, path, token string) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return bufio.NewReader(resp.Body)
}

// The loss stream tells the holder at once, with the reason: a
// force-release names the operator; a deleted session says expired.
func TestLossStream(t *testing.T) {
	e := newEnv(t, nil)
	e.createPool("p", coordinator.PoolSpec{Capacity: 2})
	s := e.session("", 5)
	events := e.openStream(t, "/v1/pools/p/events", "")
	a := e.claim("", "p", map[string]any{"session": s}).want(t, "claim", 201, "")
	b := e.claim("", "p", map[string]any{"session": s}).want(t, "claim", 201, "")

	rdA := e.openStream(t, streamPath("p", a, s), "")
	if ev, _ := sseEvent(t, rdA); ev != "held" {
		t.Fatalf("first event %q, want held", ev)
	}
	e.do("POST", fmt.Sprintf("/v1/pools/p/seats/%d/force-release", a.num("seat")), "", map[string]any{"token": a.num("token"), "reason": "disorder in court"}).want(t, "force-release", 200, "")
	ev, data := sseEvent(t, rdA)
	if ev != "lost" || !strings.Contains(data, `"reason":"force_released"`) || !strings.Contains(data, "by anonymous: disorder in court") {
		t.Fatalf("loss event %q %s", ev, data)
	}

	rdB := e.openStream(t, streamPath("p", b, s), "")
	sseEvent(t, rdB)
	e.do("DELETE", "/v1/sessions/"+s, "", nil).want(t, "delete session", 204, "")
	ev, data = sseEvent(t, rdB)
	if ev != "lost" || !strings.Contains(data, `"reason":"expired"`) {
		t.Fatalf("loss event after the session ended: %q %s", ev, data)
	}
	// The pool's event stream saw the claims and the force-release.
	seen := map[string]bool{}
	for !seen["seat-force-released"] {
		ev, _ := sseEvent(t, events)
		seen[ev] = true
	}
	if !seen["seat-claimed"] {
		t.Fatalf("events stream: %v", seen)
	}
}

// streamPath is the loss stream of claim c.
func streamPath(pool string, c reply, session string) string {
	return fmt.Sprintf("/v1/pools/%s/seats/%d/events?token=%d&session=%s", pool, c.num("seat"), c.num("token"), session)
}

// TestLossStreamSaysDraining: the instance of a seat starts draining while
// the seat is held; the loss stream says "draining", "undrained" when it
// is made ready again (since 2026-12-05), "draining" again, and then,
// when the instance goes, "lost" with instance_gone.
func TestLossStreamSaysDraining(t *testing.T) {
	e := newEnv(t, nil)
	e.createPool("p", coordinator.PoolSpec{Capacity: 2})
	ctx := context.Background()
	agent := testkit.Session(t, e.cli, 10*time.Second)
	if _, err := e.co.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1", Addr: "10.0.0.1:80"}); err != nil {
		t.Fatal(err)
	}
	s := e.session("", 5)
	c := e.claim("", "p", map[string]any{"session": s, "instance": "i1"}).want(t, "claim", 201, "")
	rd := e.openStream(t, streamPath("p", c, s), "")
	if ev, _ := sseEvent(t, rd); ev != "held" {
		t.Fatalf("first event %q, want held", ev)
	}
	if _, err := e.co.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	if ev, data := sseEvent(t, rd); ev != "draining" || !strings.Contains(data, `"instance":"i1"`) {
		t.Fatalf("event %q %s, want draining for i1", ev, data)
	}
	for _, st := range []coordinator.InstanceState{coordinator.InstanceReady, coordinator.InstanceDraining} {
		if _, err := e.co.SetInstanceState(ctx, "p", "i1", st); err != nil {
			t.Fatal(err)
		}
		want := map[coordinator.InstanceState]string{coordinator.InstanceReady: "undrained", coordinator.InstanceDraining: "draining"}[st]
		if ev, data := sseEvent(t, rd); ev != want || !strings.Contains(data, `"instance":"i1"`) {
			t.Fatalf("after %s: event %q %s, want %s for i1", st, ev, data, want)
		}
	}
	if err := e.co.DeregisterInstance(ctx, "p", "i1"); err != nil {
		t.Fatal(err)
	}
	if ev, data := sseEvent(t, rd); ev != "lost" || !strings.Contains(data, `"reason":"instance_gone"`) {
		t.Fatalf("event %q %s, want lost, instance_gone", ev, data)
	}
}

// TestInstanceGoneSeatFreedAfterIdleSweep: a seat whose instance went is
// held for the hold (the session's TTL) and then freed by the replica
// that told the client "lost", even though it closed its copy of the
// session, idle, meanwhile: the client keeps the lease alive. Found by a
// review (2026-12-05): the seat stayed held for as long as the lease.
func TestInstanceGoneSeatFreedAfterIdleSweep(t *testing.T) {
	e := newEnv(t, nil, httpapi.WithSessionIdle(time.Second))
	ctx := testkit.Ctx(t, 30*time.Second)
	e.createPool("p", coordinator.PoolSpec{Capacity: 1})
	agent := testkit.Session(t, e.cli, 10*time.Second)
	if _, err := e.co.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "bot-1"}); err != nil {
		t.Fatal(err)
	}
	const ttl = 3
	s := e.session("", ttl)
	lease, err := strconv.ParseUint(s[:16], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	ka, err := e.cli.KeepAlive(ctx, clientv3.LeaseID(lease)) // the client keeps its session alive
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ka {
		}
	}()
	c := e.claim("", "p", map[string]any{"session": s, "instance": "bot-1"}).want(t, "claim", 201, "")
	rd := e.openStream(t, streamPath("p", c, s), "")
	if ev, _ := sseEvent(t, rd); ev != "held" {
		t.Fatalf("first event %q, want held", ev)
	}
	if _, err := e.cli.Revoke(ctx, agent.Lease()); err != nil {
		t.Fatal(err)
	}
	if ev, data := sseEvent(t, rd); ev != "lost" || !strings.Contains(data, "instance_gone") {
		t.Fatalf("event %q %s, want lost, instance_gone", ev, data)
	}
	took := testkit.Eventually(t, ttl*time.Second+5*time.Second, "the seat freed after the hold", func() bool {
		seats, err := e.co.Seats(ctx, "p")
		return err == nil && len(seats) == 0
	})
	if took < ttl*time.Second-500*time.Millisecond {
		t.Errorf("seat freed %v after the loss, within the hold (the session's TTL, %ds)", took, ttl)
	}
}

// TestReleaseAfterInstanceGoneRecordsIt: a client told "lost,
// instance_gone" releases the seat (DELETE), as the README asks; the
// pool's events count that as the instance's loss, not a plain release,
// though this replica's claim never saw the instance go. Found by a review
// (2026-12-05).
func TestReleaseAfterInstanceGoneRecordsIt(t *testing.T) {
	e := newEnv(t, nil)
	ctx := testkit.Ctx(t, 30*time.Second)
	e.createPool("p", coordinator.PoolSpec{Capacity: 1})
	agent := testkit.Session(t, e.cli, 10*time.Second)
	if _, err := e.co.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "bot-1"}); err != nil {
		t.Fatal(err)
	}
	events := e.co.Watch(ctx, "p")
	s := e.session("", 10)
	c := e.claim("", "p", map[string]any{"session": s, "instance": "bot-1"}).want(t, "claim", 201, "")
	if _, err := e.cli.Revoke(ctx, agent.Lease()); err != nil {
		t.Fatal(err)
	}
	e.do("DELETE", releasePath("p", c.num("seat"), c.num("token"), s), "", nil).want(t, "release", 204, "")
	for ev := range events {
		if ev.Seat >= 0 && ev.Type != coordinator.EventSeatClaimed {
			if ev.LossReason() != coordinator.ReasonInstanceGone {
				t.Fatalf("the release after the instance went: event %s, loss reason %q; want %q", ev.Type, ev.LossReason(), coordinator.ReasonInstanceGone)
			}
			return
		}
	}
	t.Fatal("no seat event")
}

// A seat whose value in etcd was overwritten by something other than
// etcdpool is the server's trouble, not the request's: 500, with the key
// path kept out of the answer. Found by a review (2026-12-05): the loss
// stream and the force-release answered 400 invalid_input, with the key.
func TestCorruptSeatValueIsServerError(t *testing.T) {
	e := newEnv(t, nil)
	e.createPool("p", coordinator.PoolSpec{Capacity: 1})
	s := e.session("", 10)
	c := e.claim("", "p", map[string]any{"session": s}).want(t, "claim", 201, "")
	ctx := context.Background()
	resp, err := e.cli.Get(ctx, e.co.Prefix()+"/pools/p/seats/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("seat key: %v, %d keys", err, len(resp.Kvs))
	}
	for _, val := range []string{`{"holder":"x","nonce":99}`, `not json`} {
		if _, err := e.cli.Put(ctx, string(resp.Kvs[0].Key), val, clientv3.WithIgnoreLease()); err != nil {
			t.Fatal(err)
		}
		for what, r := range map[string]reply{
			"loss stream":   e.do("GET", streamPath("p", c, s), "", nil),
			"force-release": e.do("POST", "/v1/pools/p/seats/0/force-release", "", map[string]any{"token": c.num("token"), "reason": "x"}),
		} {
			if r.status != http.StatusInternalServerError || strings.Contains(r.raw, e.co.Prefix()) {
				t.Errorf("value %q: %s answered %d %s; want 500, without the key", val, what, r.status, strings.TrimSpace(r.raw))
			}
		}
	}
}

// An admin repairs a pool spec written by hand that does not decode with
// PUT, as any other. Found by a review (2026-12-05): PUT answered 500.
func TestPutRepairsMalformedSpec(t *testing.T) {
	e := newEnv(t, nil)
	e.createPool("p", coordinator.PoolSpec{Capacity: 1})
	if _, err := e.cli.Put(context.Background(), e.co.Prefix()+"/pools/p/spec", `{"capacity":"x"}`); err != nil {
		t.Fatal(err)
	}
	e.do("PUT", "/v1/pools/p", "", map[string]any{"capacity": 2}).want(t, "PUT over the malformed spec", http.StatusOK, "")
	if pl, err := e.co.GetPool(context.Background(), "p"); err != nil || pl.Spec.Capacity != 2 {
		t.Fatalf("pool after the PUT: %+v, %v; want capacity 2", pl, err)
	}
}
