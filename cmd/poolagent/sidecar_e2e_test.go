package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// sidecarTTL is the claimants' lease TTL: etcd's minimum.
const sidecarTTL = 2 * time.Second

type sidecarProc struct {
	*proc
	url      string
	seatFile string
	holder   string
}

// startSidecar runs `poolagent sidecar` for pool against endpoint.
func startSidecar(t *testing.T, endpoint, pool, holder string, extra ...string) *sidecarProc {
	t.Helper()
	return startSidecarOn(t, filepath.Join(t.TempDir(), "seat.json"), endpoint, pool, holder, extra...)
}

// startSidecarOn is startSidecar with the seat file given: a restarted
// sidecar is started on the file of the one it replaces.
func startSidecarOn(t *testing.T, seatFile, endpoint, pool, holder string, extra ...string) *sidecarProc {
	t.Helper()
	listen := testkit.FreeAddr(t)
	args := append([]string{"sidecar", "--endpoints", endpoint, "--pool", pool, "--holder", holder,
		"--ttl", sidecarTTL.String(), "--dial-timeout", "1s", "--listen", listen, "--seat-file", seatFile,
		"--loss-grace", "500ms", "--log-level", "debug"}, extra...)
	return &sidecarProc{proc: startProc(t, "sidecar "+holder, args...), url: "http://" + listen, seatFile: seatFile, holder: holder}
}

func (s *sidecarProc) ready() bool { return httpStatus(s.url+agent.ReadyzPath) == http.StatusOK }

func (s *sidecarProc) waitReady(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 15*time.Second, s.holder+" ready", func() bool {
		if s.exited() {
			t.Fatalf("%s exited with %d:\n%s", s.holder, s.exitCode, s.stderr.String())
		}
		return s.ready()
	})
}

func (s *sidecarProc) record(t *testing.T) agent.SeatRecord {
	t.Helper()
	rec, err := agent.ReadSeatFile(s.seatFile)
	if err != nil {
		t.Fatalf("read seat file of %s: %v", s.holder, err)
	}
	return rec
}

// startHolder starts etcd with pool p of one seat, and sidecar "a", which
// holds that seat once this returns.
func startHolder(t *testing.T) (*etcdtest.Cluster, *coordinator.Coordinator, *sidecarProc) {
	t.Helper()
	c := etcdtest.Start(t)
	co := testkit.Coordinator(t, c.Client(t))
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	a := startSidecar(t, c.Endpoint(0), "p", "a")
	a.waitReady(t)
	return c, co, a
}

func TestSidecarHoldsSeatAndWritesFile(t *testing.T) {
	_, co, a := startHolder(t)
	if code := httpStatus(a.url + agent.StartupzPath); code != http.StatusOK {
		t.Fatalf("/startupz = %d while held", code)
	}
	rec := a.record(t)
	s, ok := heldBy(seats(t, co, "p"), "a")
	if !ok || rec.State != agent.StateHeld || rec.Token != s.Token || rec.Seat != s.Seat || rec.Pool != "p" {
		t.Fatalf("seat file %+v does not match held seat %+v (found %v)", rec, s, ok)
	}
	env := readFile(t, strings.TrimSuffix(a.seatFile, ".json")+".env")
	if !strings.Contains(env, "ETCDPOOL_SEAT_STATE='held'") || !strings.Contains(env, "ETCDPOOL_SEAT_POOL='p'") {
		t.Fatalf("env file:\n%s", env)
	}
}

func TestSidecarSIGTERMReleasesWithinOneSecond(t *testing.T) {
	_, co, a := startHolder(t)
	a.signal(t, syscall.SIGTERM)
	took := testkit.Eventually(t, 5*time.Second, "seat free", func() bool { return len(seats(t, co, "p")) == 0 })
	if took > time.Second {
		t.Errorf("seat freed %v after SIGTERM, want <= 1s", took)
	}
	if code := a.wait(t, 5*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	if rec := a.record(t); rec.State != agent.StateReleased {
		t.Errorf("seat file state %q, want released", rec.State)
	}
}

func TestSidecarSIGKILLSeatFreeWithinTTLAndWaiterGetsIt(t *testing.T) {
	c, co, a := startHolder(t)
	b := startSidecar(t, c.Endpoint(0), "p", "b")
	testkit.Eventually(t, 10*time.Second, "b queued", func() bool { return queueLen(t, co, "p") == 1 })
	if b.ready() {
		t.Fatal("b is ready while a holds the only seat")
	}
	free, granted := killAndMeasure(t, co, "p", a, b)
	t.Logf("SIGKILL -> seat free %v, -> waiter granted %v", free, granted)
	if limit := sidecarTTL + 1500*time.Millisecond; free > limit {
		t.Errorf("seat freed %v after SIGKILL, want <= TTL+1.5s = %v", free, limit)
	}
	if rec := b.record(t); rec.State != agent.StateHeld || rec.Holder != "b" {
		t.Errorf("waiter's seat file %+v, want held by b", rec)
	}
}

// killAndMeasure SIGKILLs holder and returns how long until its seat was
// free and until waiter held a seat (as etcd shows it and its probe says).
func killAndMeasure(t *testing.T, co *coordinator.Coordinator, pool string, holder, waiter *sidecarProc) (free, granted time.Duration) {
	t.Helper()
	s, ok := heldBy(seats(t, co, pool), holder.holder)
	if !ok {
		t.Fatalf("%s holds no seat", holder.holder)
	}
	start := time.Now()
	holder.signal(t, syscall.SIGKILL)
	for free == 0 || granted == 0 {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("after 15s: free=%v granted=%v", free, granted)
		}
		ss := seats(t, co, pool)
		if _, held := heldBy(ss, holder.holder); free == 0 && !held {
			free = time.Since(start)
		}
		if _, held := heldBy(ss, waiter.holder); granted == 0 && held && waiter.ready() {
			granted = time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = s
	return free, granted
}

func TestSidecarSeatLostExitsThree(t *testing.T) {
	_, co, a := startHolder(t)
	s, _ := heldBy(seats(t, co, "p"), "a")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := co.ForceRelease(ctx, "p", s.Seat, s.Token, "test"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "probe failing", func() bool { return !a.ready() || a.exited() })
	if code := a.wait(t, 5*time.Second); code != 3 {
		t.Errorf("exit code %d after a lost seat, want 3", code)
	}
	if rec := a.record(t); rec.State != agent.StateLost || rec.Reason != coordinator.ReasonForceReleased || rec.Token != s.Token {
		t.Errorf("seat file %+v, want lost/force_released with token %d", rec, s.Token)
	}
}

// TestSidecarQueuesAgainAfterLeaseRevoked revokes the lease of a sidecar
// queued behind the holder: it must not exit but queue again under a new
// lease, count the lost session on /metrics, and get the seat when the
// holder leaves.
func TestSidecarQueuesAgainAfterLeaseRevoked(t *testing.T) {
	c, co, a := startHolder(t)
	b := startSidecar(t, c.Endpoint(0), "p", "b", "--wait-timeout", "60s")
	first := testkit.QueuedLease(t, co, "p", 0)
	etcdtest.Revoke(t, c.Client(t), first)
	testkit.QueuedLease(t, co, "p", first)
	if b.exited() {
		t.Fatalf("b exited with %d after its lease was revoked while it waited", b.exitCode)
	}
	waitMetrics(t, b.url+agent.MetricsPath, map[string]float64{`etcdpool_sessions_lost_total`: 1})
	a.signal(t, syscall.SIGTERM)
	b.waitReady(t)
	if rec := b.record(t); rec.State != agent.StateHeld || rec.Holder != "b" {
		t.Errorf("b's seat file %+v, want held by b", rec)
	}
}

// TestSidecarRestartWithinTTLKeepsSeatAndToken SIGKILLs a holding sidecar
// and starts it again on the same seat file, as the kubelet does, well
// within its 4 s TTL: it must hold the same seat under the same token and
// lease, and the waiter queued behind it must not have been granted
// anything meanwhile.
func TestSidecarRestartWithinTTLKeepsSeatAndToken(t *testing.T) {
	c := etcdtest.Start(t)
	co := testkit.Coordinator(t, c.Client(t))
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	a := startSidecar(t, c.Endpoint(0), "p", "a", "--ttl", "4s")
	a.waitReady(t)
	before := a.record(t)
	b := startSidecar(t, c.Endpoint(0), "p", "b")
	testkit.Eventually(t, 10*time.Second, "b queued", func() bool { return queueLen(t, co, "p") == 1 })

	killed := time.Now()
	a.signal(t, syscall.SIGKILL)
	a.wait(t, 5*time.Second)
	restarted := time.Now()
	a2 := startSidecarOn(t, a.seatFile, c.Endpoint(0), "p", "a", "--ttl", "4s")
	a2.waitReady(t)
	t.Logf("SIGKILL -> re-adopted and ready %v (restart -> ready %v)", time.Since(killed), time.Since(restarted))
	after := a2.record(t)
	if after.Seat != before.Seat || after.Token != before.Token || after.Lease != before.Lease {
		t.Fatalf("after restart %+v, want seat %d token %d lease %s", after, before.Seat, before.Token, before.Lease)
	}
	s, ok := heldBy(seats(t, co, "p"), "a")
	if !ok || s.Token != before.Token || b.ready() || queueLen(t, co, "p") != 1 {
		t.Fatalf("after restart: a holds %+v (%v), b ready %v, queue %d", s, ok, b.ready(), queueLen(t, co, "p"))
	}
	// The resumed lease is kept alive past the TTL it had when killed.
	testkit.Consistently(t, 5*time.Second, "seat kept", func() bool {
		s, ok := heldBy(seats(t, co, "p"), "a")
		return ok && s.Token == before.Token && a2.ready() && !b.ready()
	})
	a2.signal(t, syscall.SIGTERM)
	b.waitReady(t)
}

// TestSidecarRestartAfterTTLClaimsAfresh SIGKILLs a holding sidecar and
// starts it again only once its lease has expired: it must claim afresh,
// with a new token and lease.
func TestSidecarRestartAfterTTLClaimsAfresh(t *testing.T) {
	c, co, a := startHolder(t)
	before := a.record(t)
	a.signal(t, syscall.SIGKILL)
	a.wait(t, 5*time.Second)
	testkit.Eventually(t, 10*time.Second, "old seat expired", func() bool { return len(seats(t, co, "p")) == 0 })
	a2 := startSidecarOn(t, a.seatFile, c.Endpoint(0), "p", "a")
	a2.waitReady(t)
	after := a2.record(t)
	if after.Token == before.Token || after.Lease == before.Lease || after.State != agent.StateHeld {
		t.Fatalf("after a restart past the TTL %+v, want a fresh claim (old token %d lease %s)", after, before.Token, before.Lease)
	}
}
