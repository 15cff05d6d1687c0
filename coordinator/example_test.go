package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdpool/etcdpool/coordinator"
)

var exampleRuns int

// examplePrefix keeps repeated runs (-count) apart.
func examplePrefix(p string) string {
	exampleRuns++
	return fmt.Sprintf("%s/%d", p, exampleRuns)
}

// exampleClient dials the test etcd; real code dials its own cluster.
func exampleClient() *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{shared.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	return cli
}

func Example() {
	ctx := context.Background()
	cli := exampleClient()
	defer cli.Close()
	c, _ := coordinator.New(cli, coordinator.WithPrefix(examplePrefix("/example/basic")))
	defer c.Close()

	// An online hearing that admits at most 2 participants.
	if _, err := c.CreatePool(ctx, "hearing-42", coordinator.PoolSpec{Capacity: 2}); err != nil {
		fmt.Println(err)
		return
	}
	// Each participant holds a session; its seats die with it.
	s, _ := coordinator.NewSession(ctx, cli, coordinator.WithTTL(10*time.Second))
	defer s.Close(ctx)

	judge, _ := c.Claim(ctx, s, "hearing-42", coordinator.WithHolder("judge"))
	clerk, _ := c.Claim(ctx, s, "hearing-42", coordinator.WithHolder("clerk"))
	_, err := c.Claim(ctx, s, "hearing-42", coordinator.WithHolder("visitor"))
	fmt.Println("third participant:", errors.Is(err, coordinator.ErrNoSeat))

	st, _ := c.PoolStatus(ctx, "hearing-42")
	fmt.Printf("held %d of %d\n", st.Held, st.Spec.Capacity)

	fmt.Println("release:", judge.Release(ctx))
	fmt.Println("release again:", errors.Is(judge.Release(ctx), coordinator.ErrNotHeld))
	_ = clerk.Release(ctx)
	// Output:
	// third participant: true
	// held 2 of 2
	// release: <nil>
	// release again: true
}

func ExampleCoordinator_Claim_wait() {
	ctx := context.Background()
	cli := exampleClient()
	defer cli.Close()
	c, _ := coordinator.New(cli, coordinator.WithPrefix(examplePrefix("/example/wait")))
	defer c.Close()
	_, _ = c.CreatePool(ctx, "support-bots", coordinator.PoolSpec{Capacity: 1})
	s, _ := coordinator.NewSession(ctx, cli)
	defer s.Close(ctx)

	busy, _ := c.Claim(ctx, s, "support-bots", coordinator.WithHolder("user-1"))
	granted := make(chan *coordinator.Claim)
	go func() {
		// Blocks, in FIFO order, until a seat frees or ctx ends.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cl, err := c.Claim(wctx, s, "support-bots", coordinator.WithHolder("user-2"), coordinator.WithWait())
		if err != nil {
			fmt.Println(err)
		}
		granted <- cl
	}()
	for q, _ := c.Queue(ctx, "support-bots"); len(q) == 0; q, _ = c.Queue(ctx, "support-bots") {
		time.Sleep(10 * time.Millisecond)
	}
	q, _ := c.Queue(ctx, "support-bots")
	fmt.Println("waiting:", q[0].Holder)

	_ = busy.Release(ctx)
	cl := <-granted
	fmt.Println("granted to:", cl.Holder(), "newer token:", cl.Token() > busy.Token())
	_ = cl.Release(ctx)
	// Output:
	// waiting: user-2
	// granted to: user-2 newer token: true
}

func ExampleClaim_IsOwner() {
	ctx := context.Background()
	cli := exampleClient()
	defer cli.Close()
	c, _ := coordinator.New(cli, coordinator.WithPrefix(examplePrefix("/example/fence")))
	defer c.Close()
	_, _ = c.CreatePool(ctx, "asr", coordinator.PoolSpec{Capacity: 1})
	s, _ := coordinator.NewSession(ctx, cli)
	defer s.Close(ctx)
	cl, _ := c.Claim(ctx, s, "asr")

	// Writes on the holder's behalf go through only while it holds the seat.
	resp, _ := cli.Txn(ctx).If(cl.IsOwner()).Then(clientv3.OpPut("/example/fence/job", "started")).Commit()
	fmt.Println("while held:", resp.Succeeded)
	_ = cl.Release(ctx)
	resp, _ = cli.Txn(ctx).If(cl.IsOwner()).Then(clientv3.OpPut("/example/fence/job", "late")).Commit()
	fmt.Println("after release:", resp.Succeeded)
	// Output:
	// while held: true
	// after release: false
}

func ExampleCoordinator_CreatePool_instances() {
	ctx := context.Background()
	cli := exampleClient()
	defer cli.Close()
	c, _ := coordinator.New(cli, coordinator.WithPrefix(examplePrefix("/example/instances")))
	defer c.Close()
	// A voice platform: at most 2 channels per tenant on a shared cluster.
	_, _ = c.CreatePool(ctx, "asr", coordinator.PoolSpec{Capacity: 50, TenantLimit: 2})
	agent, _ := coordinator.NewSession(ctx, cli)
	defer agent.Close(ctx)
	_, _ = c.RegisterInstance(ctx, "asr", agent.Lease(), coordinator.Instance{ID: "asr-1", Addr: "10.0.0.7:9000", Seats: 8})

	s, _ := coordinator.NewSession(ctx, cli)
	defer s.Close(ctx)
	for i := range 3 {
		cl, err := c.Claim(ctx, s, "asr", coordinator.WithTenant("acme"))
		if err != nil {
			fmt.Println("channel", i, "refused:", errors.Is(err, coordinator.ErrNoSeat))
			continue
		}
		in, _ := cl.Instance()
		fmt.Println("channel", i, "on", in.ID, in.Addr)
	}
	// Output:
	// channel 0 on asr-1 10.0.0.7:9000
	// channel 1 on asr-1 10.0.0.7:9000
	// channel 2 refused: true
}
