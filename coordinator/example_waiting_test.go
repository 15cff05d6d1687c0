package coordinator_test

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// A claim held back by its tenant's limit says why it waits, and Explain
// says the same, with what would have to change.
func ExampleCoordinator_Explain() {
	ctx := context.Background()
	cli := exampleClient()
	defer cli.Close()
	c, _ := coordinator.New(cli, coordinator.WithPrefix(examplePrefix("/example/explain")))
	defer c.Close()
	_, _ = c.CreatePool(ctx, "asr", coordinator.PoolSpec{Capacity: 3, TenantLimit: 1})
	s, _ := coordinator.NewSession(ctx, cli, coordinator.WithTTL(10*time.Second))
	defer s.Close(ctx)
	_, _ = c.Claim(ctx, s, "asr", coordinator.WithTenant("a"))

	wctx, cancel := context.WithCancel(ctx)
	reported, done := make(chan coordinator.WaitStatus, 1), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Claim(wctx, s, "asr", coordinator.WithTenant("a"), coordinator.WithWait(),
			coordinator.WithWaitStatus(func(st coordinator.WaitStatus) {
				select {
				case reported <- st:
				default:
				}
			}))
	}()
	fmt.Println("the waiter:", <-reported)

	e, _ := c.Explain(ctx, "asr", coordinator.WithTenant("a"))
	fmt.Println("granted now:", e.Granted)
	for _, b := range e.Blockers {
		fmt.Printf("%s: %s\n  would change if: %s\n", b.Reason, b.Detail, b.Change)
	}
	cancel() // the waiter gives up
	<-done
	// Output:
	// the waiter: tenant at limit: tenant "a" holds 1 of its limit 1
	// granted now: false
	// tenant_limit: tenant "a" holds 1 of its limit 1
	//   would change if: tenant "a" releases one of its 1 seats, or its limit (1) is raised
}
