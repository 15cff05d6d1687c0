package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestLeaderStopMidRun runs claimants on a 3-member cluster, stops the
// leader mid-run, and checks that claims resume and that the history never
// breaks an invariant.
func TestLeaderStopMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster")
	}
	cl := etcdtest.StartCluster(t, 3)
	cli := cl.Client(t)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix("/ha"))
	ctx := testkit.Ctx(t, 5*time.Minute)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4, TenantLimit: 2})
	h, wch := watchHistory(ctx, t, cli, "/ha/pools/p/")

	var grants atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			haWorker(runCtx, t, c, cli, w, &grants)
		}()
	}
	testkit.Eventually(t, 2*time.Minute, "200 grants before the leader stops", func() bool { return grants.Load() >= 200 })
	leader := cl.Leader(t)
	cl.Stop(leader)
	stoppedAt := grants.Load()
	t.Logf("stopped leader m%d after %d grants", leader, stoppedAt)
	testkit.Eventually(t, 2*time.Minute, "200 grants after the leader stopped", func() bool { return grants.Load() >= stoppedAt+200 })
	stop()
	wg.Wait()
	cl.Restart(t, leader)

	h.checkUntilNow(ctx, cli, wch)
	t.Logf("history: %d grants checked, %d by claimants", h.grants, grants.Load())
	if int64(h.grants) < grants.Load() {
		t.Fatalf("history has %d grants, claimants saw %d", h.grants, grants.Load())
	}
}

func haWorker(ctx context.Context, t *testing.T, c *coordinator.Coordinator, cli *clientv3.Client, w int, grants *atomic.Int64) {
	var s *coordinator.Session
	defer func() {
		if s != nil {
			s.Orphan()
		}
	}()
	for ctx.Err() == nil {
		if s == nil || s.Err() != nil {
			var err error
			if s, err = coordinator.NewSession(ctx, cli, coordinator.WithTTL(5*time.Second)); err != nil {
				s = nil
				continue
			}
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		claim, err := c.Claim(cctx, s, "p", coordinator.WithWait(), coordinator.WithTenant(fmt.Sprintf("t%d", w%3)))
		cancel()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, coordinator.ErrSessionExpired) && !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("worker %d: claim: %v", w, err) // errors during the election are expected
			}
			continue
		}
		grants.Add(1)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = claim.Release(rctx)
		cancel()
	}
}
