package testkit_test

import (
	"os"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// shared is started by TestMain the way a package that shares one etcd
// across its tests does it (coordinator's tests among them). CI runs this
// package with `go test -race -json`: a server goroutine that touched
// os.Stderr after StartShared returned would fail it with "race detected
// outside of test execution".
var shared *testkit.Shared

func TestMain(m *testing.M) {
	os.Exit(testkit.MainWithShared(m, &shared))
}

// TestSharedEtcdServesASeat claims and releases a seat on the shared
// member through the kit's helpers.
func TestSharedEtcdServesASeat(t *testing.T) {
	cli := shared.Client(t)
	co := testkit.Coordinator(t, cli, coordinator.WithPrefix("/testkit"))
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	sess := testkit.Session(t, cli, coordinator.MinTTL)
	cl := testkit.Claim(t, co, sess, "p")
	if err := cl.Release(testkit.Ctx(t, testkit.Timeout)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the seat to be free", func() bool {
		seats, err := co.Seats(testkit.Ctx(t, testkit.Timeout), "p")
		return err == nil && len(seats) == 0
	})
}
