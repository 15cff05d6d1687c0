package testkit

import (
	"fmt"
	"os"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/internal/embedetcd"
)

// Shared is one embedded etcd member that a package's TestMain starts for
// all its tests; each test works under its own key prefix. Fault tests
// start their own members with internal/etcdtest.
//
// It is safe under `go test -json`: embedetcd starts the member with a
// silent zap logger and without the HTTP gateway, so no server goroutine
// reads os.Stderr while the testing package swaps it.
type Shared struct {
	srv *embedetcd.Server
	dir string
}

// StartShared starts the shared member in a fresh temp dir on loopback
// ports the OS picks. It takes no testing.TB: call it from TestMain and
// Close it after m.Run.
//
//	func TestMain(m *testing.M) {
//		shared, err := testkit.StartShared()
//		if err != nil { fmt.Fprintln(os.Stderr, err); os.Exit(1) }
//		code := m.Run()
//		shared.Close()
//		os.Exit(code)
//	}
func StartShared() (*Shared, error) {
	dir, err := os.MkdirTemp("", "etcdpool-test-")
	if err != nil {
		return nil, err
	}
	client, err := freeAddr()
	if err != nil {
		return nil, err
	}
	peer, err := freeAddr()
	if err != nil {
		return nil, err
	}
	srv, err := embedetcd.Start(embedetcd.Config{Dir: dir, ClientAddr: client, PeerAddr: peer, NoFsync: true})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testkit: shared etcd: %w", err)
	}
	return &Shared{srv: srv, dir: dir}, nil
}

// Endpoint is the member's client URL.
func (s *Shared) Endpoint() string { return s.srv.ClientURL() }

// Client returns a client of the shared member, closed when the test ends.
func (s *Shared) Client(t testing.TB) *clientv3.Client { return Client(t, s.Endpoint()) }

// Close stops the member and removes its data.
func (s *Shared) Close() {
	s.srv.Close()
	os.RemoveAll(s.dir)
}

// Client returns a client of endpoints with a silent logger, closed when
// the test ends.
func Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	return DialedClient(t, endpoints)
}

// DialedClient is Client with gRPC dial options, such as an interceptor
// that observes or races the client's requests.
func DialedClient(t testing.TB, endpoints []string, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: Timeout, Logger: zap.NewNop(), DialOptions: opts})
	if err != nil {
		t.Fatalf("testkit: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// MainWithShared is the body of a TestMain whose tests share one member:
// it starts the member into *shared, runs the tests, stops it, and when
// they passed fails the run on goroutines the tests leaked (goleak). It
// returns the exit code.
//
//	func TestMain(m *testing.M) { os.Exit(testkit.MainWithShared(m, &shared)) }
func MainWithShared(m *testing.M, shared **Shared) int {
	s, err := StartShared()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*shared = s
	code := m.Run()
	s.Close()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	return code
}
