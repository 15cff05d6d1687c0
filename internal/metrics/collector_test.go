package metrics

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestPoolCollector(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []string{"a", "b"} {
		testkit.CreatePool(t, co, p, coordinator.PoolSpec{Capacity: 3})
	}
	sess, err := coordinator.NewSession(ctx, cli, coordinator.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Orphan() // etcd is stopped below; the lease dies with it
	for _, id := range []string{"i1", "i2"} {
		if _, err := co.RegisterInstance(ctx, "a", sess.Lease(), coordinator.Instance{ID: id, Seats: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := co.SetInstanceState(ctx, "a", "i2", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	if _, err := co.Claim(ctx, sess, "a"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewPoolCollector(co, []string{"a"}, 5*time.Second))
	want := map[string]float64{
		`etcdpool_etcd_up`: 1,
		`etcdpool_instances{pool="a",state="draining"}`: 1,
		`etcdpool_instances{pool="a",state="ready"}`:    1,
		`etcdpool_pool_capacity{pool="a"}`:              3,
		`etcdpool_pool_held{pool="a"}`:                  1,
		`etcdpool_pool_waiting{pool="a"}`:               0,
		`etcdpool_pool_oldest_waiter_seconds{pool="a"}`: 0,
	}
	if got := gather(t, reg); !maps.Equal(got, want) {
		t.Fatalf("gathered %v, want %v (pool b is not included)", got, want)
	}
	c.Stop(0)
	reg2 := prometheus.NewRegistry()
	reg2.MustRegister(NewPoolCollector(co, nil, 500*time.Millisecond))
	if got := gather(t, reg2); !maps.Equal(got, map[string]float64{"etcdpool_etcd_up": 0}) {
		t.Fatalf("with etcd down: %v, want only etcdpool_etcd_up 0", got)
	}
}

// TestOldestWaiter checks that the oldest waiter's age is reported and
// grows while it waits.
func TestOldestWaiter(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	testkit.CreatePool(t, co, "q", coordinator.PoolSpec{Capacity: 1})
	testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "q")
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, err := co.Claim(ctx, testkit.Session(t, cli, 2*time.Second), "q", coordinator.WithWait())
		waited <- err
	}()
	defer func() { cancel(); <-waited }()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewPoolCollector(co, nil, 5*time.Second))
	const name = `etcdpool_pool_oldest_waiter_seconds{pool="q"}`
	var first float64
	testkit.Eventually(t, 5*time.Second, "waiter queued", func() bool {
		got := gather(t, reg)
		first = got[name]
		return got[`etcdpool_pool_waiting{pool="q"}`] == 1
	})
	time.Sleep(300 * time.Millisecond)
	if second := gather(t, reg)[name]; second < first+0.3 || second > 10 {
		t.Errorf("oldest waiter %vs, then %vs 300ms later; want it to grow by >= 0.3s", first, second)
	}
}
