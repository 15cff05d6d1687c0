package coordinator_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/embedetcd"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// Benchmarks run against one embedded etcd with fsync on, in one process,
// and measure etcdpool against raw etcd in the same loop, interleaved, so
// that a noisy machine moves both alike. Compare the ratio metrics.
//
//	go test -run XXX -bench . -benchtime 2000x ./coordinator/

func benchEtcd(b *testing.B) *clientv3.Client {
	b.Helper()
	srv, err := embedetcd.Start(embedetcd.Config{Dir: b.TempDir(), ClientAddr: testkit.FreeAddr(b), PeerAddr: testkit.FreeAddr(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	return newClient(b, srv.ClientURL())
}

// benchPool starts an etcd with a pool "p" of the given capacity.
func benchPool(b *testing.B, capacity int, opts ...coordinator.Option) (*clientv3.Client, *coordinator.Coordinator) {
	cli := benchEtcd(b)
	c := testkit.Coordinator(b, cli, append([]coordinator.Option{coordinator.WithPrefix("/bench")}, opts...)...)
	testkit.CreatePool(b, c, "p", coordinator.PoolSpec{Capacity: capacity})
	return cli, c
}

// rawCycle is what a hand-rolled claim costs: a txn that puts a key with a
// lease if it does not exist, then a delete.
func rawCycle(ctx context.Context, cli *clientv3.Client, key string, lease clientv3.LeaseID) error {
	_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "holder", clientv3.WithLease(lease))).Commit()
	if err == nil {
		_, err = cli.Delete(ctx, key)
	}
	return err
}

func BenchmarkCycle(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchCycle(b, clients) })
	}
}

func benchCycle(b *testing.B, clients int) {
	cli, c := benchPool(b, 1024)
	ctx := context.Background()
	var mu sync.Mutex
	var raw, pool []time.Duration
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := testkit.Session(b, cli, 30*time.Second)
			var r, p []time.Duration
			for i := w; i < b.N; i += clients {
				t0 := time.Now()
				if err := rawCycle(ctx, cli, fmt.Sprintf("/raw/%d/%d", w, i), s.Lease()); err != nil {
					b.Error(err)
					return
				}
				t1 := time.Now()
				cl, err := c.Claim(ctx, s, "p")
				if err == nil {
					err = cl.Release(ctx)
				}
				if err != nil {
					b.Error(err)
					return
				}
				r, p = append(r, t1.Sub(t0)), append(p, time.Since(t1))
			}
			mu.Lock()
			raw, pool = append(raw, r...), append(pool, p...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	reportRatio(b, "cycle", raw, pool)
}

func reportRatio(b *testing.B, what string, raw, pool []time.Duration) {
	if len(raw) == 0 || len(pool) == 0 {
		return
	}
	mr, mp := mean(raw), mean(pool)
	b.ReportMetric(float64(mr.Microseconds()), "raw-µs/"+what)
	b.ReportMetric(float64(mp.Microseconds()), "etcdpool-µs/"+what)
	b.ReportMetric(float64(mp)/float64(mr), "ratio-mean")
	b.ReportMetric(float64(p50(pool))/float64(p50(raw)), "ratio-p50")
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

func p50(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkReleaseToGrant measures, with one waiter queued, the time from a
// release to the waiter's grant, against one raw txn measured in the same
// loop. "from-commit" starts when Release returns; "from-call" when it is
// called, and so includes the release txn itself.
//
// same-process: the waiter is a claimant of the releaser's Coordinator,
// and the release hands the seat to it in its own txn (handoff.go).
// other-process: holder and waiter take turns on two Coordinators, each
// with its own client and session, as two processes would; each holder
// was granted its seat from the queue. fresh-holder: each round a new
// Coordinator (a process just started, as a sidecar) claims the free
// seat without waiting, then a claimant of another Coordinator queues; the
// holder's process learns of it from the feed its claim started
// (keepFeed).
//
// The release is timed in even rounds. In odd rounds a raw txn is timed
// in its place, after the very same steps (the waiter queued, its
// WaitStatus saying it is in line, the pause), and the release follows
// untimed: ratio-vs-raw-in-place compares the two. What ran in the
// milliseconds before a txn moves its latency as much as the txn's own
// shape does (see README, Performance), and this is the one raw txn whose
// past is the release's own. So the benchmark learns that the waiter is
// in line from its WaitStatus, not by reading the queue: a read sent
// after the waiter's enqueue and before the pause made the txn that
// followed the pause 60-80 µs slower than one whose last request was a
// write, as the raw txn's is, whatever that txn's shape.
//
// handoff-share is the share of timed releases that handed the seat off:
// the waiter sent no claim txn of its own while it was granted (1.000: all
// of them).
//
// It also times a hand-over written on raw etcd: a txn that deletes the
// holder's key, fenced by its create revision, and puts the next holder's,
// from the call until a watch on the next holder's key delivers it; the
// watch is on the waiter's client, so in the modes with two Coordinators
// it is a hand-over to another client. That is what any hand-off through
// etcd pays at the least: a txn and a watch event. ratio-vs-raw-handover
// compares with it.
func BenchmarkReleaseToGrant(b *testing.B) {
	for _, mode := range []handoffMode{sameProcess, otherProcess, freshHolder} {
		b.Run(mode.String(), func(b *testing.B) { benchReleaseToGrant(b, mode) })
	}
}

type handoffMode int

const (
	sameProcess handoffMode = iota
	otherProcess
	freshHolder
)

func (m handoffMode) String() string {
	return [...]string{"same-process", "other-process", "fresh-holder"}[m]
}

func benchReleaseToGrant(b *testing.B, mode handoffMode) {
	// The waiters' claim txns: a timed release whose waiter sent none
	// while it was granted handed its seat off (handoff-share).
	m := &countingMetrics{}
	cli, c := benchPool(b, 1, coordinator.WithMetrics(m))
	ctx := context.Background()
	s := testkit.Session(b, cli, 30*time.Second)
	claimants := []*coordinator.Coordinator{c}
	sessions := []*coordinator.Session{s}
	watcher := cli // of the raw hand-over: the next holder's client
	if mode != sameProcess {
		cli2 := newClient(b, cli.Endpoints()...)
		claimants = append(claimants, testkit.Coordinator(b, cli2, coordinator.WithPrefix("/bench"), coordinator.WithMetrics(m)))
		sessions = append(sessions, testkit.Session(b, cli2, 30*time.Second))
		watcher = cli2
	}
	var raw, warm, handover, inPlace, fromCommit, fromCall []time.Duration
	handoffs := 0
	delivered := watchPuts(b, watcher, "/rawho/next/")
	var holder *coordinator.Claim
	var holderOf *coordinator.Coordinator // fresh-holder: the holder's own
	claimFree := func() {
		co := c
		if mode == freshHolder {
			var err error
			if holderOf, err = coordinator.New(cli, coordinator.WithPrefix("/bench")); err != nil {
				b.Fatal(err)
			}
			co = holderOf
		}
		var err error
		if holder, err = co.Claim(ctx, s, "p"); err != nil {
			b.Fatal(err)
		}
	}
	claimFree()
	b.ResetTimer()
	for i := range b.N {
		granted := make(chan time.Time, 1)
		var next *coordinator.Claim
		w := (i + 1) % len(claimants) // the waiter's side
		if mode == freshHolder {
			w = 1
		}
		inLine := make(chan struct{})
		var once sync.Once
		status := coordinator.WithWaitStatus(func(ws coordinator.WaitStatus) {
			if ws.InLine {
				once.Do(func() { close(inLine) })
			}
		})
		go func() {
			cl, err := claimants[w].Claim(ctx, sessions[w], "p", coordinator.WithWait(), status)
			if err != nil {
				b.Error(err)
				once.Do(func() { close(inLine) })
			}
			next = cl
			granted <- time.Now()
		}()
		<-inLine
		time.Sleep(2 * time.Millisecond) // let the feeds settle
		if i%2 == 1 {
			// In place of the release, timed: a raw txn after the very
			// same steps. The release follows, not timed.
			inPlace = append(inPlace, rawTxn(b, cli, fmt.Sprintf("/raw/%d/in-place", i), s.Lease()))
		}
		txns := m.txns.Load()
		t0 := time.Now()
		if err := holder.Release(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		t2 := <-granted
		if next == nil {
			b.FailNow() // the waiter's Claim failed (reported): no holder for the next round
		}
		if i%2 == 0 {
			fromCall, fromCommit = append(fromCall, t2.Sub(t0)), append(fromCommit, max(t2.Sub(t1), 0))
			if m.txns.Load() == txns {
				handoffs++
			}
		}
		holder = next
		// The raw txn starts as the release did: after the same 2 ms pause.
		// A txn sent to an idle process and server pays for waking them
		// (goroutines, threads, the WAL's fsync): on these machines that is
		// ~1.4x one sent right after another. raw-warm is the latter.
		time.Sleep(2 * time.Millisecond)
		raw = append(raw, rawTxn(b, cli, fmt.Sprintf("/raw/%d", i), s.Lease()))
		warm = append(warm, rawTxn(b, cli, fmt.Sprintf("/raw/%d/warm", i), s.Lease()))
		handover = append(handover, rawHandover(b, cli, i, s.Lease(), delivered))
		if mode == freshHolder {
			b.StopTimer()
			holderOf.Close()
			if err := holder.Release(ctx); err != nil {
				b.Fatal(err)
			}
			claimFree()
			b.StartTimer()
		}
	}
	b.StopTimer()
	if holderOf != nil {
		holderOf.Close()
	}
	b.ReportMetric(float64(handoffs)/float64(max(len(fromCall), 1)), "handoff-share")
	b.ReportMetric(float64(p50(raw).Microseconds()), "raw-txn-p50-µs")
	b.ReportMetric(float64(p50(warm).Microseconds()), "raw-warm-txn-p50-µs")
	b.ReportMetric(float64(p50(fromCommit).Microseconds()), "grant-from-commit-p50-µs")
	b.ReportMetric(float64(p50(fromCall).Microseconds()), "grant-from-call-p50-µs")
	b.ReportMetric(float64(p50(fromCommit))/float64(p50(raw)), "ratio-from-commit")
	b.ReportMetric(float64(p50(fromCall))/float64(p50(raw)), "ratio-from-call")
	b.ReportMetric(float64(p50(fromCall))/float64(p50(warm)), "ratio-from-call-vs-warm")
	b.ReportMetric(float64(p50(handover).Microseconds()), "raw-handover-p50-µs")
	b.ReportMetric(float64(p50(fromCall))/float64(p50(handover)), "ratio-vs-raw-handover")
	if len(inPlace) > 0 {
		b.ReportMetric(float64(p50(inPlace).Microseconds()), "raw-in-place-p50-µs")
		b.ReportMetric(float64(p50(fromCall))/float64(p50(inPlace)), "ratio-vs-raw-in-place")
	}
}

// watchPuts watches prefix and sends the time each put under it arrives.
func watchPuts(b *testing.B, cli *clientv3.Client, prefix string) <-chan time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	<-wch // registered
	out := make(chan time.Time, 1)
	go func() {
		for wr := range wch {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					out <- time.Now()
				}
			}
		}
	}()
	return out
}

// rawHandover times a hand-over on raw etcd, after the same 2 ms pause as
// the release: from the txn's call to the watch event of the next holder's
// key (see BenchmarkReleaseToGrant).
func rawHandover(b *testing.B, cli *clientv3.Client, i int, lease clientv3.LeaseID, delivered <-chan time.Time) time.Duration {
	ctx := context.Background()
	held, next := fmt.Sprintf("/rawho/held/%d", i), fmt.Sprintf("/rawho/next/%d", i)
	put, err := cli.Put(ctx, held, "h", clientv3.WithLease(lease))
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	t0 := time.Now()
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(held), "=", put.Header.Revision)).
		Then(clientv3.OpDelete(held), clientv3.OpPut(next, "n", clientv3.WithLease(lease))).Commit()
	if err != nil || !resp.Succeeded {
		b.Fatal("raw hand-over:", err)
	}
	return (<-delivered).Sub(t0)
}

// rawTxn times one put-if-absent txn with a lease.
func rawTxn(b *testing.B, cli *clientv3.Client, key string, lease clientv3.LeaseID) time.Duration {
	t0 := time.Now()
	if _, err := cli.Txn(context.Background()).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "x", clientv3.WithLease(lease))).Commit(); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}
