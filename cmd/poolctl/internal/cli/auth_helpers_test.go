package cli

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// enableAuth turns on etcd auth with user root (password s3cret, role
// root) and returns a client logged in as root. The harness's own client,
// which has no user, is refused from then on.
func (h *harness) enableAuth(t *testing.T) *clientv3.Client {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	if _, err := h.cli.RoleAdd(ctx, "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cli.UserAdd(ctx, "root", "s3cret"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	return h.userClient(t, "root", "s3cret")
}

// userClient is a client of the harness's etcd logged in as user.
func (h *harness) userClient(t *testing.T, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: h.cli.Endpoints(), DialTimeout: 5 * time.Second,
		Username: user, Password: password, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
