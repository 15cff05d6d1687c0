package etcdclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
)

// TestCheckAccess checks a user with read on /a/ and readwrite on /a/w/
// against an auth-enabled etcd: what it may do passes, the first refusal
// is a permanent etcdclient.OpError naming operation and key, and nothing is
// written (the revision does not move).
func TestCheckAccess(t *testing.T) {
	c := etcdtest.Start(t)
	root := etcdtest.EnableAuth(t, c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := root.RoleAdd(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		key string
		typ authpb.Permission_Type
	}{{"/a/", authpb.READ}, {"/a/w/", authpb.READWRITE}} {
		if _, err := root.RoleGrantPermission(ctx, "r", p.key, clientv3.GetPrefixRangeEnd(p.key), clientv3.PermissionType(p.typ)); err != nil {
			t.Fatal(err)
		}
	}
	etcdtest.AddUser(t, root, "u", "pw", "r")
	cli := etcdtest.UserClient(t, c.Endpoints(), "u", "pw")
	before, err := root.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	ok := []etcdclient.Access{{Key: "/a/", Prefix: true}, {Write: true, Key: "/a/w/", Prefix: true}, {Write: true, Key: "/a/w/k"}}
	if err := etcdclient.CheckAccess(ctx, cli, ok); err != nil {
		t.Errorf("allowed: %v", err)
	}
	err = etcdclient.CheckAccess(ctx, cli, append(ok, etcdclient.Access{Write: true, Key: "/a/", Prefix: true}))
	var op *etcdclient.OpError
	if !errors.As(err, &op) || op.Op != "write" || op.Key != "/a/*" || !etcdclient.Denied(err) || !etcdclient.IsPermanent(err) {
		t.Errorf("write on /a/: %v", err)
	}
	if err := etcdclient.CheckAccess(ctx, cli, []etcdclient.Access{{Key: "/b"}}); err == nil || err.Error() != "etcd refused read of /b: permission denied" {
		t.Errorf("read of /b: %v", err)
	}
	after, err := root.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.Revision != before.Header.Revision {
		t.Errorf("CheckAccess wrote: revision %d -> %d", before.Header.Revision, after.Header.Revision)
	}
}
