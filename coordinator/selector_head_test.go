package coordinator_test

import (
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestSelectorHeadStepsOutOfUnboundPool: a waiter that asks for labels and
// reaches the head of the line after the pool's last instance went does
// not hold up the line: no instance matches it, which is its own
// constraint (it steps out), while claims without labels take the
// anonymous seats now free. It was reported as "every instance is full",
// so it stayed at the head and the pool's seats sat idle while the waiter
// behind it waited.
func TestSelectorHeadStepsOutOfUnboundPool(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	agent := testkit.Session(t, cli, 30*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1", Seats: 3, Labels: map[string]string{"zone": "x"}}); err != nil {
		t.Fatal(err)
	}
	held := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithHolder("h"))
	labeled := waitingClaim(ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithLabels(map[string]string{"zone": "x"}))
	waitQueued(t, c, "p", 1)
	plain := waitingClaim(ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithHolder("plain"))
	waitQueued(t, c, "p", 2)
	if err := c.DeregisterInstance(ctx, "p", "i1"); err != nil {
		t.Fatal(err)
	}
	<-held.Done() // its instance went: the seat is given back
	select {
	case err := <-plain:
		if err != nil {
			t.Fatalf("plain waiter: %v", err)
		}
	case err := <-labeled:
		t.Fatalf("labeled waiter ended (%v) with no instance to bind to", err)
	case <-time.After(10 * time.Second):
		q, _ := c.Queue(ctx, "p")
		t.Fatalf("the waiter without labels was not granted within 10s of the seat freeing; queue %+v", q)
	}
}
