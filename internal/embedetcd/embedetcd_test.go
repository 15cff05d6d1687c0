package embedetcd_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/embedetcd"
	"github.com/etcdpool/etcdpool/internal/testkit"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestSecondMemberOnTheSameDirFailsFast starts a member, then a second one
// on the same data dir with other ports: it must fail at once with
// embedetcd.ErrDirInUse naming the dir, not block on etcd's database lock. Once the
// first is closed the dir can be used again.
func TestSecondMemberOnTheSameDirFailsFast(t *testing.T) {
	dir := t.TempDir()
	first, err := embedetcd.Start(embedetcd.Config{Dir: dir, ClientAddr: testkit.FreeAddr(t), PeerAddr: testkit.FreeAddr(t), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		srv *embedetcd.Server
		err error
	}
	res := make(chan result, 1)
	cfg := embedetcd.Config{Dir: dir, ClientAddr: testkit.FreeAddr(t), PeerAddr: testkit.FreeAddr(t), NoFsync: true}
	go func() {
		s, err := embedetcd.Start(cfg)
		res <- result{s, err}
	}()
	var r result
	select {
	case r = <-res:
	case <-time.After(10 * time.Second): // it would block on bbolt's lock for good
		t.Fatal("a second start on a data dir in use still blocks after 10s")
	}
	err = r.err
	if err == nil {
		r.srv.Close()
		first.Close()
		t.Fatal("a second member started on a data dir in use")
	}
	if !errors.Is(err, embedetcd.ErrDirInUse) || !strings.Contains(err.Error(), dir) {
		t.Errorf("second start: %v, want embedetcd.ErrDirInUse naming %s", err, dir)
	}
	first.Close()
	again, err := embedetcd.Start(embedetcd.Config{Dir: dir, ClientAddr: testkit.FreeAddr(t), PeerAddr: testkit.FreeAddr(t), NoFsync: true})
	if err != nil {
		t.Fatalf("start after the first closed: %v", err)
	}
	again.Close()
}

// TestNoHTTPGateway: the member serves no /v3/ HTTP gateway. The gateway's
// websocket proxy builds a logrus logger on os.Stderr in a server
// goroutine, which races with `go test -json` swapping os.Stderr when a
// TestMain starts the member (internal/testkit's TestMain shows the race
// itself, in about one run of three with the gateway on; this check is
// deterministic).
func TestNoHTTPGateway(t *testing.T) {
	srv, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir(), ClientAddr: testkit.FreeAddr(t), PeerAddr: testkit.FreeAddr(t), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Post(srv.ClientURL()+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"YQ=="}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /v3/kv/range: %s, want 404: the HTTP gateway is on", resp.Status)
	}
}

// TestCompactsHistory runs a member with a 1 s compaction: within a few
// seconds a revision written at the start is compacted away, so history
// (and the deleted keys range compares walk) stays bounded.
func TestCompactsHistory(t *testing.T) {
	srv, err := embedetcd.Start(embedetcd.Config{Dir: t.TempDir(), ClientAddr: testkit.FreeAddr(t), PeerAddr: testkit.FreeAddr(t),
		NoFsync: true, Compaction: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli := testkit.Client(t, srv.ClientURL())
	ctx := testkit.Ctx(t, 20*time.Second)
	first, err := cli.Put(ctx, "k", "0")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "the first revision compacted", func() bool {
		_, _ = cli.Put(ctx, "k", "1")
		_, err := cli.Get(ctx, "k", clientv3.WithRev(first.Header.Revision))
		return errors.Is(err, rpctypes.ErrCompacted)
	})
}
