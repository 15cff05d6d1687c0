package agent

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestSidecarReadyzFailsBeforeLeaseCanEnd: a sidecar cut off from etcd
// (every byte both ways dropped, the connection kept open) fails /readyz
// AppStopWithin before its lease can end on the server, while it still
// holds the seat; an app whose liveness probe is /readyz is then stopped
// before the seat can be granted to another pod. While keepalives are
// answered, /readyz never fails, and once they are answered again it
// passes again. Without AppStopWithin /readyz failed only at the session's
// local deadline, the session's margin (500 ms here) before the lease's
// end.
func TestSidecarReadyzFailsBeforeLeaseCanEnd(t *testing.T) {
	c, _, _ := setup(t)
	px := etcdtest.NewProxy(t, c.Endpoint(0))
	co := testkit.Coordinator(t, testkit.Client(t, px.URL()))
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	cfg := sidecarConfig(t)
	cfg.TTL, cfg.AppStopWithin = config.Duration(3*time.Second), config.Duration(1500*time.Millisecond)
	sc := NewSidecar(co, cfg)
	srv := httptest.NewServer(sc.Handler(nil))
	defer srv.Close()
	runSidecar(t, sc)
	testkit.Eventually(t, 5*time.Second, "held", sc.Held)

	// Keepalives answered (one every TTL/3): /readyz passes throughout.
	for end := time.Now().Add(cfg.TTL.D() + 500*time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if code := get(t, srv.URL+ReadyzPath); code != 200 {
			t.Fatalf("/readyz = %d while keepalives are answered", code)
		}
	}

	px.Blackhole()
	time.Sleep(50 * time.Millisecond) // an answer already on its way in the client
	sc.mu.Lock()
	sess := sc.sess
	sc.mu.Unlock()
	leaseEnd := sess.Deadline().Add(sess.Margin()) // no longer moves: nothing is answered
	var failedAt time.Time
	var body string
	for failedAt.IsZero() && time.Now().Before(leaseEnd) {
		if code, b := getBody(t, srv.URL+ReadyzPath); code == 503 {
			failedAt, body = time.Now(), b
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if failedAt.IsZero() {
		t.Fatal("/readyz still passed when the lease could end on the server")
	}
	if lead := leaseEnd.Sub(failedAt); lead < cfg.AppStopWithin.D()-100*time.Millisecond {
		t.Errorf("/readyz failed %v before the lease could end; want AppStopWithin (%v)", lead, cfg.AppStopWithin)
	}
	if !sc.Held() || !strings.Contains(body, "appStopWithin") {
		t.Errorf("held %v, /readyz said %q; want the seat still held and the lease's risk said", sc.Held(), body)
	}

	// Answered again before the session's deadline: the seat is kept, and
	// /readyz passes again.
	px.Restore()
	testkit.Eventually(t, 5*time.Second, "/readyz passing again", func() bool { return get(t, srv.URL+ReadyzPath) == 200 })
	if rec := sc.Record(); rec.State != StateHeld || errors.Is(sess.Err(), coordinator.ErrSessionExpired) {
		t.Errorf("after keepalives are answered again: %+v, session %v; want the seat still held", rec, sess.Err())
	}
}
