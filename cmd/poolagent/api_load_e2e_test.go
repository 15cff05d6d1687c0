package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// The HTTP API under load: many sessions keep alive, claim and release
// through two `poolagent serve` replicas sharing one pool, and one replica
// is killed (SIGKILL) mid-run. Afterwards etcd's history must show no
// over-grant (never more seats held than the capacity, nor more per tenant
// than its limit, at any revision), and no client that talked only to the
// surviving replica may have lost a seat or its session. Clients of the
// killed replica move to the survivor; one whose claim failed without an
// answer deletes its session and opens another (the outcome was unknown:
// a seat or a queue entry may have been left bound to it).
//
// The default run is small; ETCDPOOL_API_LOAD=1 runs 1,000 sessions for
// 30 seconds.
func TestAPILoadTwoReplicasOneKilled(t *testing.T) {
	t.Parallel() // with the other API process tests: they wait on timers and processes, not CPU
	lc := loadConfig{sessions: 60, capacity: 20, tenantLimit: 6, duration: 3 * time.Second, killAt: time.Second, ttl: 5,
		hold: 30 * time.Millisecond, backoff: 100 * time.Millisecond, wait: 0.5, minGranted: 20}
	if os.Getenv("ETCDPOOL_API_LOAD") != "" {
		// 1,000 sessions, each holding a seat or pausing up to 4 s at a
		// time (about 2 s on average): some 500 claims per second.
		lc = loadConfig{sessions: 1000, capacity: 200, tenantLimit: 50, duration: 30 * time.Second, killAt: 10 * time.Second, ttl: 10,
			hold: 4 * time.Second, backoff: 4 * time.Second, wait: 2, minGranted: 50}
	}
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co, err := coordinator.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := co.CreatePool(ctx, "load", coordinator.PoolSpec{Capacity: lc.capacity, TenantLimit: lc.tenantLimit})
	if err != nil {
		t.Fatal(err)
	}
	replica := func(name string) (*agentProc, string) {
		api := testkit.FreeAddr(t)
		yaml := fmt.Sprintf("agent:\n  pools: [{name: %s, capacity: 1}]\n  instances: [{pool: %s, id: %s}]\napi:\n  listen: %s\n", name, name, name, api)
		// A request timeout that a claim under load on a small machine fits in.
		return startAgent(t, c.Endpoint(0), yaml, "--ttl", "5s", "--dial-timeout", "3s"), "http://" + api
	}
	killed, urlA := replica("replica-a")
	_, urlB := replica("replica-b")

	run := newLoadRun(lc, urlA, urlB)
	time.AfterFunc(lc.killAt, func() { killed.signal(t, syscall.SIGKILL) })
	run.run()
	t.Logf("%s", run.summary())
	if run.failures.Load() > 0 {
		t.Errorf("%d wrong answers; first: %v", run.failures.Load(), run.firstErr.Load())
	}
	if n := run.survivorLost.Load(); n > 0 {
		t.Errorf("%d seats or sessions lost by clients that kept calling keepalive through the surviving replica", n)
	}
	if run.granted.Load() < int64(lc.minGranted) {
		t.Errorf("only %d claims granted, want at least %d: the load did not reach the pool's limits", run.granted.Load(), lc.minGranted)
	}
	checkNoOverGrant(t, cli, co.Prefix(), "load", pool.Revision, lc.capacity, lc.tenantLimit)
	// Every session was deleted, or, where etcd did not answer the delete
	// in time, expires within its TTL.
	var st coordinator.PoolStatus
	testkit.Eventually(t, time.Duration(lc.ttl)*time.Second+10*time.Second, "an empty pool after the run", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err = co.PoolStatus(ctx, "load")
		return err == nil && st.Held == 0 && st.Waiting == 0
	})
}

// loadConfig sizes a load run.
type loadConfig struct {
	sessions, capacity, tenantLimit int
	duration, killAt                time.Duration
	ttl                             int           // session TTL, seconds
	hold, backoff                   time.Duration // a seat is held, and a refused client pauses, up to this long
	wait                            float64       // the wait of half the claims, seconds
	minGranted                      int           // fewer grants means the run tested little
}

// loadRun is the clients of one load run and what they saw.
type loadRun struct {
	lc           loadConfig
	urlA, urlB   string
	hc           *http.Client
	granted      atomic.Int64
	refused      atomic.Int64
	released     atomic.Int64
	renewed      atomic.Int64
	unavailable  atomic.Int64 // 503: etcd did not answer in time
	unrenewed    atomic.Int64 // losses after keepalives failed for a TTL
	failovers    atomic.Int64
	failures     atomic.Int64 // wrong answers
	survivorLost atomic.Int64 // seats or sessions lost by clients of the survivor
	firstErr     atomic.Value
}

func newLoadRun(lc loadConfig, urlA, urlB string) *loadRun {
	tr := &http.Transport{MaxIdleConnsPerHost: lc.sessions, MaxConnsPerHost: lc.sessions}
	return &loadRun{lc: lc, urlA: urlA, urlB: urlB, hc: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
}

func (lr *loadRun) summary() string {
	return fmt.Sprintf("%d sessions: %d granted, %d refused or timed out, %d released, %d keepalives, %d failovers, %d unavailable (503)",
		lr.lc.sessions, lr.granted.Load(), lr.refused.Load(), lr.released.Load(), lr.renewed.Load(), lr.failovers.Load(), lr.unavailable.Load()) +
		fmt.Sprintf(", %d losses after keepalives failed for a TTL", lr.unrenewed.Load())
}

func (lr *loadRun) fail(err error) {
	lr.failures.Add(1)
	lr.firstErr.CompareAndSwap(nil, err)
}

// run runs every client until the duration has passed.
func (lr *loadRun) run() {
	end := time.Now().Add(lr.lc.duration)
	var wg sync.WaitGroup
	for i := range lr.lc.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := lr.urlB
			if i%2 == 0 {
				url = lr.urlA
			}
			(&loadClient{lr: lr, id: i, tenant: fmt.Sprintf("t%d", i%5), url: url}).run(end)
		}()
	}
	wg.Wait()
	lr.hc.CloseIdleConnections()
}

// loadClient is one session's client.
type loadClient struct {
	lr      *loadRun
	id      int
	tenant  string
	mu      sync.Mutex
	url     string // the replica it talks to
	session string
	moved   bool      // it talked to the killed replica
	renewed time.Time // when the last keepalive that succeeded (or the open) was SENT
}

// errNoAnswer is a request that got no HTTP answer (the replica is gone).
var errNoAnswer = errors.New("no answer")

// call sends a request to the client's replica.
func (c *loadClient) call(method, path string, body any, out any) (int, error) {
	c.mu.Lock()
	url := c.url
	c.mu.Unlock()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	resp, err := c.lr.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		_ = json.Unmarshal(raw, out)
	}
	return resp.StatusCode, nil
}

// retry sends a request until it gets an answer other than 503, at most
// four times: after no answer it fails over, after a 503 (etcd did not
// answer in time) it pauses. retried says whether an earlier try may have
// been applied.
func (c *loadClient) retry(method, path string, body, out any) (code int, retried bool, err error) {
	for try := 0; ; try++ {
		code, err = c.call(method, path, body, out)
		switch {
		case try == 3:
			return code, retried, err
		case errors.Is(err, errNoAnswer):
			c.failover()
		case code == 503:
			c.lr.unavailable.Add(1)
			time.Sleep(100*time.Millisecond + rand.N(400*time.Millisecond))
		default:
			return code, retried, err
		}
		retried = true
	}
}

// failover moves the client to the surviving replica.
func (c *loadClient) failover() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.url != c.lr.urlB {
		c.url, c.moved = c.lr.urlB, true
		c.lr.failovers.Add(1)
	}
}

// lost records a lost seat or session. It is a violation when the client
// talked only to the surviving replica and its lease cannot have expired:
// the server renewed it no earlier than the last successful keepalive was
// sent, for the TTL. (Under overload a keepalive can fail with 503, and a
// lease left unrenewed for its TTL expires: counted, not a violation.)
func (c *loadClient) lost(what string) {
	c.mu.Lock()
	moved := c.moved || c.url == c.lr.urlA
	renewed := c.renewed
	c.mu.Unlock()
	switch {
	case moved:
	case time.Since(renewed) < time.Duration(c.lr.lc.ttl)*time.Second:
		c.lr.survivorLost.Add(1)
		c.lr.fail(fmt.Errorf("client %d (surviving replica only, renewed %v ago): %s", c.id, time.Since(renewed).Round(time.Millisecond), what))
	default:
		c.lr.unrenewed.Add(1)
	}
}

// open opens a new session, failing over once if the replica is gone.
func (c *loadClient) open() bool {
	var s struct{ ID string }
	sent := time.Now()
	code, _, err := c.retry("POST", "/v1/sessions", map[string]any{"ttl": c.lr.lc.ttl}, &s)
	if code != 201 {
		c.lr.fail(fmt.Errorf("client %d: open session: %d %v", c.id, code, err))
		return false
	}
	c.mu.Lock()
	c.session, c.renewed = s.ID, sent
	c.mu.Unlock()
	return true
}

func (c *loadClient) sessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// keepAlive renews the session every TTL/3 until stop closes.
func (c *loadClient) keepAlive(stop <-chan struct{}) {
	t := time.NewTicker(time.Duration(c.lr.lc.ttl) * time.Second / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s, sent := c.sessionID(), time.Now()
		code, err := c.call("POST", "/v1/sessions/"+s+"/keepalive", nil, nil)
		if errors.Is(err, errNoAnswer) {
			c.failover()
			sent = time.Now()
			code, err = c.call("POST", "/v1/sessions/"+s+"/keepalive", nil, nil)
		}
		switch {
		case err == nil && code == 200:
			c.lr.renewed.Add(1)
			c.mu.Lock()
			if c.session == s {
				c.renewed = sent
			}
			c.mu.Unlock()
		case code == 503:
			c.lr.unavailable.Add(1)
		case code == 410 && s != c.sessionID():
			// replaced meanwhile by a new session
		case code == 410:
			c.lost("session gone while kept alive")
		default:
			c.lr.fail(fmt.Errorf("client %d: keepalive: %d %v", c.id, code, err))
		}
	}
}

// run claims and releases until end, then deletes the session.
func (c *loadClient) run(end time.Time) {
	if !c.open() {
		return
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.keepAlive(stop) }()
	for time.Now().Before(end) {
		c.cycle()
	}
	close(stop)
	wg.Wait()
	if code, retried, err := c.retry("DELETE", "/v1/sessions/"+c.sessionID(), nil, nil); code != 204 && code != 503 && !(retried && code == 410) {
		c.lr.fail(fmt.Errorf("client %d: delete session: %d %v", c.id, code, err))
	}
}

// cycle claims a seat (half the time waiting up to 0.5s), holds it a
// moment and releases it.
func (c *loadClient) cycle() {
	body := map[string]any{"session": c.sessionID(), "tenant": c.tenant, "holder": fmt.Sprintf("client-%d", c.id)}
	if c.lr.lc.wait > 0 && rand.IntN(2) == 0 {
		body["wait"] = c.lr.lc.wait
	}
	var cl struct {
		Seat, Token int64
		Code        string
	}
	code, err := c.call("POST", "/v1/pools/load/claims", body, &cl)
	switch {
	case errors.Is(err, errNoAnswer):
		// Unknown outcome: a seat or a queue entry may be bound to the
		// session. Deleting the session frees both.
		c.failover()
		if code, _, err := c.retry("DELETE", "/v1/sessions/"+c.sessionID(), nil, nil); code != 204 && code != 410 && code != 503 {
			c.lr.fail(fmt.Errorf("client %d: delete session after failover: %d %v", c.id, code, err))
		}
		c.open()
		return
	case code == 409 || code == 408:
		c.lr.refused.Add(1)
		time.Sleep(c.lr.lc.backoff/5 + rand.N(c.lr.lc.backoff)) // back off with jitter
		return
	case code == 503:
		// Overloaded: etcd did not answer within the request timeout. The
		// claim's outcome is resolved by the replica (it never returns
		// a seat it is unsure of, and frees one it took too late).
		c.lr.unavailable.Add(1)
		return
	case code == 410:
		c.lost("session gone on claim")
		c.open()
		return
	case code != 201:
		c.lr.fail(fmt.Errorf("client %d: claim: %d %s", c.id, code, cl.Code))
		return
	}
	c.lr.granted.Add(1)
	time.Sleep(rand.N(c.lr.lc.hold))
	path := fmt.Sprintf("/v1/pools/load/seats/%d?token=%d&session=%s", cl.Seat, cl.Token, c.sessionID())
	// After no answer (the replica died) or a 503 (etcd did not answer in
	// time) the release may or may not have been applied: retry.
	code, retried, err := c.retry("DELETE", path, nil, nil)
	switch {
	case err == nil && code == 204:
		c.lr.released.Add(1)
	case retried && (code == 404 || code == 412):
		// The first try may have released the seat before its replica
		// died; the seat is not this claim's either way.
		c.lr.released.Add(1)
	case code == 404 || code == 412:
		c.lost(fmt.Sprintf("seat %d token %d not held at release", cl.Seat, cl.Token))
	case code == 410:
		c.lost("session gone at release")
		c.open()
	case code == 503: // still overloaded; the seat goes with the session
	default:
		c.lr.fail(fmt.Errorf("client %d: release: %d %v", c.id, code, err))
	}
}
