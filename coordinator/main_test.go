package coordinator_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// shared is one embedded etcd for the examples and for tests that need no
// faults; each test works under its own prefix. Fault tests start their
// own members with internal/etcdtest.
var shared *testkit.Shared

func TestMain(m *testing.M) {
	etcdtest.RunMemberIfChild() // the chaos test's etcd members are this binary
	runClaimantIfChild()        // and so are its claimants
	os.Exit(testkit.MainWithShared(m, &shared))
}

// newCountingClient returns a client of the shared member that counts its
// unary calls of method (such as "/etcdserverpb.KV/Range"), or all of
// them when method is "".
func newCountingClient(t testing.TB, method string) (*clientv3.Client, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	count := func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "" || m == method {
			n.Add(1)
		}
		return invoker(ctx, m, req, reply, cc, opts...)
	}
	return newObservedClient(t, shared.Endpoint(), count), &n
}

// keyName returns the last segment of key: a claim's name (<lease>-<nonce>).
func keyName(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }

// newClient returns a client of endpoints, or of the shared member.
func newClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		return shared.Client(t)
	}
	return testkit.Client(t, endpoints...)
}

// newObservedClient returns a client whose unary RPCs pass through ic,
// closed when the test ends (after the sessions the test opens later:
// cleanups run last-in, first-out).
func newObservedClient(t testing.TB, endpoint string, ic grpc.UnaryClientInterceptor) *clientv3.Client {
	t.Helper()
	return newDialedClient(t, endpoint, grpc.WithChainUnaryInterceptor(ic))
}

// newDialedClient is newObservedClient with any dial options, such as a
// stream interceptor as well.
func newDialedClient(t testing.TB, endpoint string, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	return testkit.DialedClient(t, []string{endpoint}, opts...)
}

var prefixSeq int

// uniquePrefix returns a key prefix no other test, nor another run of
// this one (-count=N), uses on the shared etcd.
func uniquePrefix(t testing.TB) string {
	prefixSeq++
	return fmt.Sprintf("/test/%s/%d", t.Name(), prefixSeq)
}

// newCoord returns a Coordinator on the shared etcd under a fresh prefix.
func newCoord(t testing.TB, opts ...coordinator.Option) (*coordinator.Coordinator, *clientv3.Client) {
	t.Helper()
	cli := newClient(t)
	opts = append([]coordinator.Option{coordinator.WithPrefix(uniquePrefix(t))}, opts...)
	return testkit.Coordinator(t, cli, opts...), cli
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

// signalLogger returns a logger that sends on ch, without blocking, each
// time it logs a message containing msg, at any level.
func signalLogger(msg string, ch chan<- struct{}) *slog.Logger {
	return slog.New(signalHandler{msg: msg, ch: ch})
}

type signalHandler struct {
	msg string
	ch  chan<- struct{}
}

func (signalHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.msg) {
		notify(h.ch)
	}
	return nil
}

func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }
