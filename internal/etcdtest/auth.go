package etcdtest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// RootPassword is the password EnableAuth gives user root.
const RootPassword = "root-pw"

// EnableAuth turns on etcd auth through cli (a client without a user):
// it adds role root and user root (password RootPassword) holding it,
// enables auth, and returns a client logged in as root, closed when the
// test ends. cli is refused from then on.
func EnableAuth(t testing.TB, cli *clientv3.Client) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.RoleAdd(ctx, "root"); err != nil {
		t.Fatalf("etcdtest: role add root: %v", err)
	}
	if _, err := cli.UserAdd(ctx, "root", RootPassword); err != nil {
		t.Fatalf("etcdtest: user add root: %v", err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatalf("etcdtest: grant root: %v", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatalf("etcdtest: auth enable: %v", err)
	}
	return UserClient(t, cli.Endpoints(), "root", RootPassword)
}

// AddUser adds user with password through root and grants it roles,
// which must exist.
func AddUser(t testing.TB, root *clientv3.Client, user, password string, roles ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := root.UserAdd(ctx, user, password); err != nil {
		t.Fatalf("etcdtest: user add %s: %v", user, err)
	}
	for _, r := range roles {
		if _, err := root.UserGrantRole(ctx, user, r); err != nil {
			t.Fatalf("etcdtest: grant %s to %s: %v", r, user, err)
		}
	}
}

// UserClient returns a client logged in as user, dialled with opts (an
// interceptor, say), closed when the test ends.
func UserClient(t testing.TB, endpoints []string, user, password string, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		Username: user, Password: password, Logger: zap.NewNop(), DialOptions: opts})
	if err != nil {
		t.Fatalf("etcdtest: client for %s: %v", user, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// AddPrefixRole adds role through root, with permission perm on every key
// under prefix.
func AddPrefixRole(t testing.TB, root *clientv3.Client, role, prefix string, perm clientv3.PermissionType) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := root.RoleAdd(ctx, role); err != nil {
		t.Fatalf("etcdtest: role add %s: %v", role, err)
	}
	if _, err := root.RoleGrantPermission(ctx, role, prefix, clientv3.GetPrefixRangeEnd(prefix), perm); err != nil {
		t.Fatalf("etcdtest: grant %s on %s: %v", role, prefix, err)
	}
}
