package etcdtest

import (
	"context"
	"testing"
	"time"
)

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
	if _, err := cli.Put(ctx, "k", "v2"); err != nil {
		t.Fatalf("put after leader stop: %v", err)
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
