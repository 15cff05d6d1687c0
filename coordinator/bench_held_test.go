package coordinator_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// BenchmarkCycleAtHeld: claim+release on a pool where 10,000 seats are
// held, against the same on an empty pool, interleaved in one loop. The
// ratio says whether the cost grows with the number of held seats.
//
//	go test -run XXX -bench CycleAtHeld -benchtime 2000x ./coordinator/
func BenchmarkCycleAtHeld(b *testing.B) {
	const held = 10_000
	cli := benchEtcd(b)
	c := testkit.Coordinator(b, cli, coordinator.WithPrefix("/bench"))
	testkit.CreatePool(b, c, "empty", coordinator.PoolSpec{Capacity: 2 * held})
	testkit.CreatePool(b, c, "full", coordinator.PoolSpec{Capacity: 2 * held})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := testkit.Session(b, cli, time.Minute)
			for i := w; i < held; i += 16 {
				if _, err := c.Claim(ctx, s, "full"); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := testkit.Session(b, cli, time.Minute)
	var empty, full []time.Duration
	cycle := func(pool string) time.Duration {
		t0 := time.Now()
		cl, err := c.Claim(ctx, s, pool)
		if err == nil {
			err = cl.Release(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	cycle("empty")
	cycle("full")
	b.ResetTimer()
	for range b.N {
		empty = append(empty, cycle("empty"))
		full = append(full, cycle("full"))
	}
	b.StopTimer()
	b.ReportMetric(float64(p50(empty).Microseconds()), "empty-p50-µs")
	b.ReportMetric(float64(p50(full).Microseconds()), "10k-held-p50-µs")
	b.ReportMetric(float64(p50(full))/float64(p50(empty)), "ratio-p50")
	b.ReportMetric(float64(mean(full))/float64(mean(empty)), "ratio-mean")
}
