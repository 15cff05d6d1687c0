package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestRefusalIsNotOlderThanTheRead: a claim refuses only on a state at
// least as new as a read made during the call. Here process Q's pool feed
// syncs while Q's claim has a probe out, on a read older than a release
// the probe saw, and the release's events have not reached the feed yet.
// The claim must not refuse on the feed's state ("holds 2 of 2") but read
// the pool again and take the seat. CI hit this window once under load
// (TestStaleReleaseKeepsCacheHonest, "holds 3 of 3" right after a
// force-release); the interceptors here make it certain.
func TestRefusalIsNotOlderThanTheRead(t *testing.T) {
	prefix := fmt.Sprintf("/refusalread/%d", time.Now().UnixNano())
	poolKeys := prefix + "/pools/p/"
	var q *coordinator.Coordinator
	var holdFeedRead, holdProbe, holdDeletes atomic.Bool
	feedReadHeld, feedRead, deletes := make(chan struct{}), make(chan struct{}), make(chan struct{})
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		switch r := req.(type) {
		case *pb.RangeRequest: // the feed's read of the whole pool: held until the probe has read
			if string(r.Key) == poolKeys && holdFeedRead.CompareAndSwap(true, false) {
				close(feedReadHeld)
				<-feedRead
			}
		case *pb.TxnRequest: // a probe has no compares: the feed syncs before it is taken
			if len(r.Compare) == 0 && holdProbe.CompareAndSwap(true, false) {
				close(feedRead)
				for deadline := time.Now().Add(10 * time.Second); !coordinator.FeedSynced(q, "p"); time.Sleep(time.Millisecond) {
					if time.Now().After(deadline) {
						t.Error("the pool feed did not sync once its read was let through: the race was not set up")
						break
					}
				}
			}
		}
		return err
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || method != "/etcdserverpb.Watch/Watch" {
			return s, err
		}
		return &heldStream{ClientStream: s, hold: func(m any) {
			if wr, ok := m.(*pb.WatchResponse); ok && holdDeletes.Load() && hasDelete(wr) {
				<-deletes
			}
		}}, nil
	}
	qcli := newDialedClient(t, shared.Endpoint(), grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream))
	t.Cleanup(func() { close(deletes) }) // before the client closes
	var err error
	if q, err = coordinator.New(qcli, coordinator.WithPrefix(prefix)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	pcli := newClient(t)
	p := testkit.Coordinator(t, pcli, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, p, "p", coordinator.PoolSpec{Capacity: 2})
	x := mustClaim(t, ctx, p, testkit.Session(t, pcli, 30*time.Second), "p")

	// Q's first claim starts its feed, whose read sees x held.
	holdFeedRead.Store(true)
	sq := testkit.Session(t, qcli, 30*time.Second)
	mustClaim(t, ctx, q, sq, "p")
	select {
	case <-feedReadHeld:
	case <-ctx.Done():
		t.Fatal("the pool feed never read the pool")
	}
	// x is released; the events stop at Q's watch.
	holdDeletes.Store(true)
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Q's view says 2 of 2: it reads a probe, and the feed syncs meanwhile.
	holdProbe.Store(true)
	cl, err := q.Claim(ctx, sq, "p")
	if errors.Is(err, coordinator.ErrNoSeat) {
		t.Fatalf("refused on the feed's state, older than the claim's own probe: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if holdProbe.Load() {
		t.Fatal("the claim sent no probe: the race was not set up")
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// heldStream passes each message it receives to hold before returning it.
type heldStream struct {
	grpc.ClientStream
	hold func(any)
}

func (s *heldStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.hold(m)
	}
	return err
}

func hasDelete(wr *pb.WatchResponse) bool {
	for _, ev := range wr.Events {
		if ev.Type == mvccpb.DELETE {
			return true
		}
	}
	return false
}
