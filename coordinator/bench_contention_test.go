package coordinator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// BenchmarkContention: 64 contenders on 16 seats, each with its own
// session, claim (waiting), hold, release, again. Each b.N iteration is one
// round: raw etcd for a second, then etcdpool for a second, in the same
// process against the same server. Raw is the hand-rolled cycle on 16 keys:
// a put-if-absent txn with a lease on a random key (another key on
// failure), hold, delete. The ratio is etcdpool's grant rate over raw's
// cycle rate; ratio-min is the worst round, so a collapse after the first
// queue forms shows there.
//
// max-grant-gap-ms is the longest time without a grant in any round, and
// raw-max-cycle-gap-ms the longest without a completed raw cycle: a gap of
// 40-80 ms in raw's rounds too is etcd itself stalling (its backend commit
// or WAL fsync on a shared disk), which costs the round it falls in up to a
// tenth of its rate, raw's or ours; the round log says which round had it.
//
// "compacted" compacts etcd after each round, as a production etcd's
// auto-compaction does every few minutes. Without it, range compares walk
// the deleted keys etcd still indexes: sessions reuse their claims' names
// (names.go), but each round ends by cancelling the claims in flight, and
// a claim cancelled mid-transaction retires its name (README, Known
// limits).
//
// "processes=8" spreads the contenders over 8 Coordinators, each with its
// own client, as 8 processes: each process's holders follow the pool
// (keepFeed), and releases of different processes aim at the same first
// waiter (handoff.go). Raw's contenders are spread over the same 8 clients,
// so the ratio compares like with like: 8 connections cost etcd more than
// one, raw's cycles included (7-10 % fewer cycles/s on a 2-core VM). Each
// round also times raw on one client, as in the single-process variant,
// and reports that ratio too (ratio-one-client-min, -mean).
//
//	go test -run XXX -bench Contention -benchtime 5x ./coordinator/
func BenchmarkContention(b *testing.B) {
	for _, hold := range []time.Duration{0, 10 * time.Millisecond} {
		for _, compact := range []bool{true, false} {
			etcd := map[bool]string{true: "compacted", false: "uncompacted"}[compact]
			name := fmt.Sprintf("c=64/cap=16/hold=%v/%s", hold, etcd)
			b.Run(name, func(b *testing.B) { benchContention(b, hold, compact, 1) })
			if compact {
				b.Run(name+"/processes=8", func(b *testing.B) { benchContention(b, hold, compact, 8) })
			}
		}
	}
}

const (
	contenders = 64
	seats      = 16
	roundTime  = time.Second
)

func benchContention(b *testing.B, hold time.Duration, compact bool, processes int) {
	cli, c := benchPool(b, seats)
	ctx := context.Background()
	cs := []*coordinator.Coordinator{c}
	clis := []*clientv3.Client{cli}
	for range processes - 1 {
		other := newClient(b, cli.Endpoints()...)
		clis, cs = append(clis, other), append(cs, testkit.Coordinator(b, other, coordinator.WithPrefix("/bench")))
	}
	sessions := make([]*coordinator.Session, contenders)
	for i := range sessions {
		sessions[i] = testkit.Session(b, clis[i%processes], 30*time.Second)
	}
	// One unrecorded round each: sessions, connections and the pool cache
	// warm up, as in any long-running service.
	rawContention(b, clis, sessions, hold, -1)
	poolContention(b, cs, sessions, hold)
	minRatio, sum, maxGap, rawMaxGap := 1e9, 0.0, time.Duration(0), time.Duration(0)
	minOne, sumOne := 1e9, 0.0 // processes > 1: against raw on one client
	b.ResetTimer()
	for round := range b.N {
		one := 0.0
		if processes > 1 {
			one, _ = rawContention(b, clis[:1], sessions, hold, b.N+round)
		}
		raw, rawGap := rawContention(b, clis, sessions, hold, round)
		pool, gap := poolContention(b, cs, sessions, hold)
		if compact {
			b.StopTimer()
			etcdtest.Compact(b, cli)
			b.StartTimer()
		}
		ratio := pool / raw
		b.Logf("round %d: raw %.0f cycles/s, etcdpool %.0f grants/s, ratio %.2f, longest gap between grants %v (raw: between cycles %v)",
			round, raw, pool, ratio, gap.Round(time.Microsecond), rawGap.Round(time.Microsecond))
		minRatio, sum, maxGap, rawMaxGap = min(minRatio, ratio), sum+ratio, max(maxGap, gap), max(rawMaxGap, rawGap)
		if processes > 1 {
			b.Logf("round %d: raw on one client %.0f cycles/s, ratio %.2f", round, one, pool/one)
			minOne, sumOne = min(minOne, pool/one), sumOne+pool/one
		}
	}
	b.StopTimer()
	_ = ctx
	b.ReportMetric(float64(maxGap.Microseconds())/1000, "max-grant-gap-ms")
	b.ReportMetric(float64(rawMaxGap.Microseconds())/1000, "raw-max-cycle-gap-ms")
	b.ReportMetric(minRatio, "ratio-min")
	b.ReportMetric(sum/float64(b.N), "ratio-mean")
	if processes > 1 {
		b.ReportMetric(minOne, "ratio-one-client-min")
		b.ReportMetric(sumOne/float64(b.N), "ratio-one-client-mean")
	}
}

// rawContention runs the hand-rolled cycle for one round and returns
// cycles/s and the longest time without a completed cycle, measured as
// poolContention measures its gaps between grants. Contender i sends on
// clis[i%len(clis)]; round names its keys apart from other rounds'.
func rawContention(b *testing.B, clis []*clientv3.Client, sessions []*coordinator.Session, hold time.Duration, round int) (float64, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), roundTime)
	defer cancel()
	gaps := newGapMeter()
	var n atomic.Int64
	var wg sync.WaitGroup
	for i, s := range sessions {
		cli := clis[i%len(clis)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				key := fmt.Sprintf("/raw/%d/%d", round, rand.IntN(seats))
				resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
					Then(clientv3.OpPut(key, "h", clientv3.WithLease(s.Lease()))).Commit()
				if err != nil || !resp.Succeeded {
					continue
				}
				time.Sleep(hold)
				if _, err := cli.Delete(context.Background(), key); err == nil && ctx.Err() == nil {
					n.Add(1)
					gaps.tick()
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / roundTime.Seconds(), gaps.longest(ctx)
}

// gapMeter tracks the longest time between ticks, from its creation on.
type gapMeter struct {
	mu   sync.Mutex
	last time.Time
	gap  time.Duration
}

func newGapMeter() *gapMeter { return &gapMeter{last: time.Now()} }

func (g *gapMeter) tick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	g.last, g.gap = now, max(g.gap, now.Sub(g.last))
}

// longest returns the longest gap, counting the time from the last tick
// to ctx's deadline, the round's end.
func (g *gapMeter) longest(ctx context.Context) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	end, _ := ctx.Deadline()
	return max(g.gap, end.Sub(g.last))
}

// poolContention runs claim/hold/release for one round and returns grants/s
// and the longest time without a grant, from the round's start to its
// end: with 64 contenders on 16 seats a grant comes every millisecond or
// two, so a long gap is seats sitting idle while claimants wait. Contender
// i claims through cs[i%len(cs)] with sessions[i]. The round ends by
// cancelling every claim in flight.
func poolContention(b testing.TB, cs []*coordinator.Coordinator, sessions []*coordinator.Session, hold time.Duration) (float64, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), roundTime)
	defer cancel()
	gaps := newGapMeter()
	var n atomic.Int64
	var wg sync.WaitGroup
	for i, s := range sessions {
		c := cs[i%len(cs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cl, err := c.Claim(ctx, s, "p", coordinator.WithWait())
				if err != nil {
					if ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				gaps.tick()
				time.Sleep(hold)
				if err := cl.Release(context.Background()); err != nil {
					b.Error(err)
					return
				}
				if ctx.Err() == nil {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / roundTime.Seconds(), gaps.longest(ctx)
}
