package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestStaleHandoffReleasesAlone: a release's hand-off is planned on this
// process's view, and its compares join the release's in one txn. When one
// fails (here the pool's spec is rewritten between the plan and the txn),
// nothing of that txn applies; Release must then free the seat alone and
// return nil, and the waiter, now head, claims the seat itself.
func TestStaleHandoffReleasesAlone(t *testing.T) {
	prefix := fmt.Sprintf("/stalehandoff/%d", time.Now().UnixNano())
	raw := newClient(t)
	var spoil atomic.Bool
	var releases atomic.Int64
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.TxnRequest); ok && deletesUnder(r, "/seats/") {
			releases.Add(1)
			if deletesUnder(r, "/queue/") && spoil.CompareAndSwap(true, false) {
				spec := prefix + "/pools/p/spec"
				resp, err := raw.Get(ctx, spec)
				if err == nil {
					_, err = raw.Put(ctx, spec, string(resp.Kvs[0].Value)) // same spec, new mod revision
				}
				if err != nil {
					t.Error(err)
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli := newObservedClient(t, shared.Endpoint(), ic)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix))
	other := testkit.Coordinator(t, raw, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	holder, first := holderAndWaiter(t, ctx, c, other, cli)

	spoil.Store(true)
	releases.Store(0)
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("release after a failed hand-off: %v", err)
	}
	if spoil.Load() {
		t.Fatal("the release planned no hand-off")
	}
	if n := releases.Load(); n != 2 {
		t.Errorf("the release sent %d txns; want 2: the hand-off, then the release alone", n)
	}
	select {
	case next := <-first:
		seats, err := other.Seats(ctx, "p")
		if err != nil || len(seats) != 1 || next == nil || seats[0].Token != next.Token() {
			t.Fatalf("after the release the pool holds %+v (%v); want the waiter's seat", seats, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not granted the seat the release freed")
	}
}

// deletesUnder reports whether the txn's Then branch deletes a key whose
// path has segment.
func deletesUnder(r *pb.TxnRequest, segment string) bool {
	for _, op := range r.Success {
		if d := op.GetRequestDeleteRange(); d != nil && strings.Contains(string(d.Key), segment) {
			return true
		}
	}
	return false
}
