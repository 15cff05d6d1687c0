// Package etcdtest starts real etcd servers for tests: one embedded member or
// a 3-member embedded cluster on 127.0.0.1 with ports the OS picks and data in
// t.TempDir. It also has fault helpers: compact, revoke a lease, stop and
// restart a member. It never mocks etcd.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/internal/embedetcd"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// Cluster is a set of embedded members started by Start or StartCluster.
type Cluster struct {
	t       testing.TB
	cfgs    []embedetcd.Config
	members []*embedetcd.Server
}

// Start starts one member and stops it when the test ends.
func Start(t testing.TB) *Cluster { return StartCluster(t, 1) }

// StartMaxTxnOps starts one member whose --max-txn-ops is n, stops it when
// the test ends, and returns its client URL.
func StartMaxTxnOps(t testing.TB, n uint) string {
	t.Helper()
	srv, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir(), ClientAddr: testkit.FreeAddr(t), PeerAddr: testkit.FreeAddr(t), MaxTxnOps: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv.ClientURL()
}

// StartCluster starts n members that form one cluster and stops them when the
// test ends. Members run without fsync: tests trade durability for speed.
// A port taken between its reservation and etcd's bind (by a test in another
// package) is retried with fresh ports, up to three times.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := startCluster(t, n)
		if err == nil {
			t.Cleanup(c.Close)
			return c
		}
		if !errors.Is(err, embedetcd.ErrAddrInUse) || attempt == 3 {
			t.Fatalf("etcdtest: %v", err)
		}
		t.Logf("etcdtest: %v; retrying with new ports", err)
	}
}

// freeAddr reserves a loopback address for a member; a variable so that a
// test can hand out a taken one.
var freeAddr = testkit.FreeAddr

func startCluster(t testing.TB, n int) (*Cluster, error) {
	c := &Cluster{t: t, members: make([]*embedetcd.Server, n)}
	var initial []string
	for i := 0; i < n; i++ {
		cfg := embedetcd.Config{
			Name:       fmt.Sprintf("m%d", i),
			Dir:        t.TempDir(),
			ClientAddr: freeAddr(t),
			PeerAddr:   freeAddr(t),
			NoFsync:    true,
		}
		initial = append(initial, cfg.Name+"=http://"+cfg.PeerAddr)
		c.cfgs = append(c.cfgs, cfg)
	}
	errs := make(chan error, n)
	for i := range c.cfgs {
		c.cfgs[i].InitialCluster = strings.Join(initial, ",")
		go func(i int) {
			s, err := embedetcd.Start(c.cfgs[i])
			c.members[i] = s
			errs <- err
		}(i)
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.Close()
		return nil, first
	}
	return c, nil
}

// Endpoints lists the client URLs of all members, running or not.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, cfg := range c.cfgs {
		eps = append(eps, "http://"+cfg.ClientAddr)
	}
	return eps
}

// Endpoint returns member i's client URL.
func (c *Cluster) Endpoint(i int) string { return "http://" + c.cfgs[i].ClientAddr }

// Client returns a client for all members, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client { return testkit.Client(t, c.Endpoints()...) }

// Leader returns the index of the member that is raft leader, waiting up to
// 10s for one to be elected.
func (c *Cluster) Leader(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range c.members {
			if m != nil && m.IsLeader() {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("etcdtest: no leader within 10s")
	return -1
}

// Stop stops member i, keeping its data dir.
func (c *Cluster) Stop(i int) {
	if m := c.members[i]; m != nil {
		m.Close()
		c.members[i] = nil
	}
}

// Restart starts a stopped member i again on the same ports and data dir.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	cfg := c.cfgs[i]
	cfg.ExistingCluster = true
	var err error
	// The old listener may linger briefly after Close; retry for a while.
	for try := 0; try < 50; try++ {
		var s *embedetcd.Server
		if s, err = embedetcd.Start(cfg); err == nil {
			c.members[i] = s
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("etcdtest: restart %s: %v", cfg.Name, err)
}

// Close stops every member. It is safe to call more than once.
func (c *Cluster) Close() {
	for i := range c.members {
		c.Stop(i)
	}
}

// Compact compacts the keyspace at the current revision and waits for it to
// be physical, so that watches from older revisions get ErrCompacted.
func Compact(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "compact-probe")
	if err != nil {
		t.Fatalf("etcdtest: compact get: %v", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("etcdtest: compact: %v", err)
	}
	return rev
}

// Revoke revokes a lease, as if its holder had died and the TTL had passed.
func Revoke(t testing.TB, cli *clientv3.Client, id clientv3.LeaseID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Revoke(ctx, id); err != nil {
		t.Fatalf("etcdtest: revoke %x: %v", id, err)
	}
}
