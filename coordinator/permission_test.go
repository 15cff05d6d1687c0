package coordinator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestPermissionDeniedEndsAtOnce: a claimant whose etcd user may read the
// pool but not write its seats gets the permission error at once, with
// and without wait, instead of waiting or retrying forever.
func TestPermissionDeniedEndsAtOnce(t *testing.T) {
	cl := etcdtest.Start(t)
	root := etcdtest.EnableAuth(t, cl.Client(t))
	ctx := testkit.Ctx(t, 30*time.Second)
	rc := testkit.Coordinator(t, root)
	testkit.CreatePool(t, rc, "gpu", coordinator.PoolSpec{Capacity: 1})
	if _, err := root.RoleAdd(ctx, "viewer"); err != nil {
		t.Fatal(err)
	}
	prefix := rc.Prefix() + "/pools/"
	if _, err := root.RoleGrantPermission(ctx, "viewer", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermRead)); err != nil {
		t.Fatal(err)
	}
	etcdtest.AddUser(t, root, "viewer", "pw", "viewer")
	cli := etcdtest.UserClient(t, cl.Endpoints(), "viewer", "pw")
	c := testkit.Coordinator(t, cli)
	s := testkit.Session(t, cli, 10*time.Second)
	for _, tc := range []struct {
		name string
		opts []coordinator.ClaimOption
	}{{"no wait", nil}, {"wait", []coordinator.ClaimOption{coordinator.WithWait()}}} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.Claim(cctx, s, "gpu", tc.opts...)
			if !errors.Is(err, rpctypes.ErrPermissionDenied) {
				t.Fatalf("Claim: %v, want permission denied", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("permission denied took %v to surface", d)
			}
		})
	}
}
