package etcdtest

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestStartRetriesATakenPort: a member whose reserved port was taken before
// etcd bound it is started again on fresh ports, not failed (the CI failure
// of TestAPILoadTwoReplicasOneKilled).
func TestStartRetriesATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var calls atomic.Int32
	freeAddr = func(t testing.TB) string {
		if calls.Add(1) == 1 {
			return taken.Addr().String() // the first member's client port
		}
		return testkit.FreeAddr(t)
	}
	defer func() { freeAddr = testkit.FreeAddr }()
	cli := Start(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("reserved %d addresses, want 4: two per attempt, one retry", n)
	}
}

func TestThreeMemberClusterSurvivesLeaderStop(t *testing.T) {
	c := StartCluster(t, 3)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	l := c.Leader(t)
	c.Stop(l)
	// A put sent on the stopped member's connection as it closes fails
	// with Unavailable, and clientv3 does not retry a put: a client tries
	// again, and the other members must take it.
	for {
		_, err := cli.Put(ctx, "k", "v2")
		if err == nil {
			break
		}
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			t.Fatalf("put after leader stop: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Restart(t, l)
	resp, err := cli.Get(ctx, "k")
	if err != nil || string(resp.Kvs[0].Value) != "v2" {
		t.Fatalf("get after restart: %v %v", resp, err)
	}
	if rev := Compact(t, cli); rev == 0 {
		t.Fatal("compact returned revision 0")
	}
}
