package cli

import (
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestWatchReportsOutage stops etcd under a running watch and seats -w:
// both say on stderr that the connection was lost, watch says when it is
// back, and events committed after it came back still arrive.
func TestWatchReportsOutage(t *testing.T) {
	cluster := etcdtest.Start(t)
	cli := cluster.Client(t)
	// Through a proxy, so that the test can cut poolctl's streams: etcd's
	// Close otherwise waits 7 s for them to end.
	proxy := etcdtest.NewProxy(t, cluster.Endpoint(0))
	h := &harness{t: t, eps: proxy.URL(), cli: cli, c: testkit.Coordinator(t, cli)}
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 2})
	inv, wait := h.startWatch(t, "gpu", "gpu")
	seatsInv := newInvocation()
	seatsWait := h.start(seatsInv, "seats", "gpu", "-w")
	testkit.Eventually(t, 10*time.Second, "seats -w", func() bool { return strings.Contains(seatsInv.out.String(), "SEAT") })

	stopped := make(chan struct{})
	go func() { defer close(stopped); cluster.Stop(0) }()
	time.Sleep(200 * time.Millisecond) // etcd no longer accepts connections
	proxy.Restore()                    // and those it had are gone
	<-stopped
	for _, i := range []*invocation{inv, seatsInv} {
		testkit.Eventually(t, 10*time.Second, "the loss on stderr", func() bool {
			return strings.Contains(i.err.String(), "connection to etcd lost")
		})
	}
	cluster.Restart(t, 0)
	testkit.Eventually(t, 15*time.Second, "the return on stderr", func() bool {
		return strings.Contains(inv.err.String(), "watch: connection to etcd restored after ") &&
			strings.Contains(seatsInv.err.String(), "connection to etcd restored")
	})
	h.claim("gpu", coordinator.WithHolder("after-outage"))
	testkit.Eventually(t, 10*time.Second, "events after the outage", func() bool {
		return strings.Contains(inv.out.String(), "after-outage") && strings.Contains(seatsInv.out.String(), "after-outage")
	})
	for _, w := range []struct {
		inv  *invocation
		wait func() result
	}{{inv, wait}, {seatsInv, seatsWait}} {
		w.inv.sigs.send(t, os.Interrupt)
		w.wait().want(t, ExitOK)
	}
}

// TestWatchResyncsAfterCompaction cuts a watch off while the history it
// still needs is written and compacted away: it says so on stderr and
// prints a resync event, then goes on.
func TestWatchResyncsAfterCompaction(t *testing.T) {
	cluster := etcdtest.Start(t)
	cli := cluster.Client(t)
	proxy := etcdtest.NewProxy(t, cluster.Endpoint(0))
	h := &harness{t: t, eps: proxy.URL(), cli: cli, c: testkit.Coordinator(t, cli)}
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 2})
	inv, wait := h.startWatch(t, "gpu", "gpu", "-o", "json")
	proxy.Blackhole()
	h.claim("gpu", coordinator.WithHolder("lost-in-compaction"))
	h.createPool("later", coordinator.PoolSpec{Capacity: 1}) // so the claim's revision is compacted too
	etcdtest.Compact(t, cli)
	proxy.Restore()
	testkit.Eventually(t, 15*time.Second, "the resync", func() bool {
		return strings.Contains(inv.out.String(), `"type":"resync"`) &&
			strings.Contains(inv.err.String(), "watch: etcd compacted history this watch still needed")
	})
	h.claim("gpu", coordinator.WithHolder("after-resync"))
	testkit.Eventually(t, 10*time.Second, "events after the resync", func() bool {
		return strings.Contains(inv.out.String(), "after-resync")
	})
	inv.sigs.send(t, os.Interrupt)
	r := wait()
	r.want(t, ExitOK)
	if strings.Contains(r.out, "lost-in-compaction") {
		t.Errorf("an event from compacted history arrived; the test did not cut the watch off:\n%s", r.out)
	}
}

// TestWatchEndsWhenRefused: a running watch whose user loses its read
// permission is cancelled by etcd when the watch is re-opened (here after
// its connection is cut). poolctl watch must end with the denial, not
// retry it forever: clientv3 passes etcd's cancel reason as a plain error,
// which looked transient until etcdclient.WatchErr.
func TestWatchEndsWhenRefused(t *testing.T) {
	cluster := etcdtest.Start(t)
	proxy := etcdtest.NewProxy(t, cluster.Endpoint(0))
	h := &harness{t: t, eps: proxy.URL(), cli: cluster.Client(t)}
	h.c = testkit.Coordinator(t, h.cli)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1})
	root := h.enableAuth(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	prefix := h.c.Prefix() + "/pools/"
	etcdtest.AddPrefixRole(t, root, "watcher", prefix, clientv3.PermissionType(clientv3.PermRead))
	etcdtest.AddUser(t, root, "watcher", "pw", "watcher")
	h.c = testkit.Coordinator(t, root) // the harness's own client is refused now
	_, wait := h.startWatch(t, "gpu", loginTimeouts("--user", "watcher:pw", "gpu")...)

	if _, err := root.RoleRevokePermission(ctx, "watcher", prefix, clientv3.GetPrefixRangeEnd(prefix)); err != nil {
		t.Fatal(err)
	}
	proxy.Restore() // the watch is re-opened, and refused
	r := wait()
	if r.code != ExitDenied || !strings.Contains(r.err, "permission denied") {
		t.Fatalf("watch refused by etcd: exit %d, stderr %q; want %d and the denial", r.code, r.err, ExitDenied)
	}
}
