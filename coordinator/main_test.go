package coordinator_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/embedetcd"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
)

// sharedEndpoint is one embedded etcd for the examples and for tests that
// need no faults; each test works under its own prefix. Fault tests start
// their own members with internal/etcdtest.
var sharedEndpoint string

func TestMain(m *testing.M) {
	etcdtest.RunMemberIfChild() // the chaos test's etcd members are this binary
	runClaimantIfChild()        // and so are its claimants
	dir, err := os.MkdirTemp("", "coordinator-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err := embedetcd.Start(embedetcd.Config{Dir: dir, ClientAddr: freeAddr(), PeerAddr: freeAddr(), NoFsync: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedEndpoint = srv.ClientURL()
	code := m.Run()
	srv.Close()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func newClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = []string{sharedEndpoint}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newObservedClient returns a client whose unary RPCs pass through ic,
// closed when the test ends (after the sessions the test opens later:
// cleanups run last-in, first-out).
func newObservedClient(t testing.TB, endpoint string, ic grpc.UnaryClientInterceptor) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(ic)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

var prefixSeq int

// newCoord returns a Coordinator on the shared etcd under a fresh prefix.
func newCoord(t testing.TB, opts ...coordinator.Option) (*coordinator.Coordinator, *clientv3.Client) {
	t.Helper()
	cli := newClient(t)
	prefixSeq++
	opts = append([]coordinator.Option{coordinator.WithPrefix(fmt.Sprintf("/test/%s/%d", t.Name(), prefixSeq))}, opts...)
	return newCoordOn(t, cli, opts...), cli
}

// newCoordOn returns a Coordinator on cli, closed when the test ends.
func newCoordOn(t testing.TB, cli *clientv3.Client, opts ...coordinator.Option) *coordinator.Coordinator {
	t.Helper()
	c, err := coordinator.New(cli, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newSession(t testing.TB, cli *clientv3.Client, ttl time.Duration) *coordinator.Session {
	t.Helper()
	s, err := coordinator.NewSession(context.Background(), cli, coordinator.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// mustClaim claims a seat or fails the test.
func mustClaim(t testing.TB, ctx context.Context, c *coordinator.Coordinator, s *coordinator.Session, pool string, opts ...coordinator.ClaimOption) *coordinator.Claim {
	t.Helper()
	cl, err := c.Claim(ctx, s, pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func createPool(t testing.TB, c *coordinator.Coordinator, name string, spec coordinator.PoolSpec) {
	t.Helper()
	if _, err := c.CreatePool(context.Background(), name, spec); err != nil {
		t.Fatal(err)
	}
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
