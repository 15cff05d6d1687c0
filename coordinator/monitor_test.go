package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestCloseDuringWatchedRelease: while a release's reply is held, the
// holder's monitor sees the seat's delete and leaves the reason to the
// release (seatGone). Closing the Coordinator must still close Done with
// ErrClosed at once, not when the release returns.
func TestCloseDuringWatchedRelease(t *testing.T) {
	var hold atomic.Bool
	held, free := make(chan struct{}), make(chan struct{})
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := req.(*pb.TxnRequest); ok && deletesUnder(r, "/seats/") && hold.CompareAndSwap(true, false) {
			close(held)
			<-free
		}
		return err
	}
	cli := newObservedClient(t, shared.Endpoint(), ic)
	c, err := coordinator.New(cli, coordinator.WithPrefix(fmt.Sprintf("/closerelease/%d", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	cl := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	done := cl.Done()                 // starts the monitor's watch
	time.Sleep(20 * time.Millisecond) // for the watch to be registered
	hold.Store(true)
	released := make(chan error, 1)
	go func() { released <- cl.Release(ctx) }()
	<-held
	time.Sleep(200 * time.Millisecond) // the monitor sees the delete and waits for the release
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		close(free)
		t.Fatal("Done stayed open after Close while the release's reply was held")
	}
	if err := cl.Err(); !errors.Is(err, coordinator.ErrClosed) {
		t.Errorf("Err() = %v, want ErrClosed", err)
	}
	close(free)
	<-closed
	if err := <-released; err != nil {
		t.Errorf("release: %v", err)
	}
}
