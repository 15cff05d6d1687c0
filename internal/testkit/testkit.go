// Package testkit is the one kit of helpers that etcdpool's tests share,
// so that each is written once: ports the OS picks, contexts bounded by a
// test, polling with a deadline (Eventually, Consistently), a
// goroutine-safe buffer for a process's output, a check that a process is
// gone, files in a temp dir, flattened Prometheus series, a coordinator,
// sessions, pools and claims on a real etcd, and an embedded etcd that a
// TestMain starts for a whole package (StartShared). Nothing here mocks
// etcd; internal/etcdtest starts members and clusters with faults.
//
// Every helper that takes a testing.TB fails the test on error and cleans
// up after it.
package testkit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Timeout bounds each etcd request a helper makes, including the revoke
// when a session is closed at the end of a test.
const Timeout = 5 * time.Second

// Eventually polls cond every 10ms until it holds, and returns how long
// that took. It fails the test if cond does not hold within d.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// SyncBuffer is a bytes.Buffer that a process (or an in-process command)
// may write while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WriteFile writes content to name in a fresh temp dir and returns its
// path.
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Coordinator returns a coordinator on cli, closed when the test ends.
func Coordinator(t testing.TB, cli *clientv3.Client, opts ...coordinator.Option) *coordinator.Coordinator {
	t.Helper()
	co, err := coordinator.New(cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(co.Close)
	return co
}

// Session opens a session with the given TTL. It is closed (its lease
// revoked, within Timeout) when the test ends.
func Session(t testing.TB, cli *clientv3.Client, ttl time.Duration) *coordinator.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	s, err := coordinator.NewSession(ctx, cli, coordinator.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// CreatePool creates a pool.
func CreatePool(t testing.TB, co *coordinator.Coordinator, name string, spec coordinator.PoolSpec) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if _, err := co.CreatePool(ctx, name, spec); err != nil {
		t.Fatal(err)
	}
}

// Claim claims a seat of pool in sess without waiting.
func Claim(t testing.TB, co *coordinator.Coordinator, sess *coordinator.Session, pool string, opts ...coordinator.ClaimOption) *coordinator.Claim {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cl, err := co.Claim(ctx, sess, pool, opts...)
	if err != nil {
		t.Fatalf("claim a seat of %s: %v", pool, err)
	}
	return cl
}

// Consistently polls cond every 10ms for d and fails the test the first
// time it does not hold. Use it only for what must not happen, with d a
// few times longer than the time in which it would happen.
func Consistently(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); time.Since(start) < d; time.Sleep(10 * time.Millisecond) {
		if !cond() {
			t.Fatalf("%s stopped holding after %v", what, time.Since(start))
		}
	}
}

// QueuedLease waits up to 10s until pool has exactly one waiter, under a
// lease other than old, and returns that lease: the waiter's session.
func QueuedLease(t testing.TB, co *coordinator.Coordinator, pool string, old clientv3.LeaseID) clientv3.LeaseID {
	t.Helper()
	var lease clientv3.LeaseID
	Eventually(t, 10*time.Second, "one waiter with a new lease", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		q, err := co.Queue(ctx, pool)
		if err != nil || len(q) != 1 || q[0].Lease == old {
			return false
		}
		lease = q[0].Lease
		return true
	})
	return lease
}
