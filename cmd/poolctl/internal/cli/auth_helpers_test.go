package cli

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/internal/etcdtest"
)

// enableAuth turns on etcd auth with user root (password
// etcdtest.RootPassword, role root) and returns a client logged in as root.
// The harness's own client, which has no user, is refused from then on.
func (h *harness) enableAuth(t *testing.T) *clientv3.Client {
	t.Helper()
	return etcdtest.EnableAuth(t, h.cli)
}

// userClient returns a client logged in as user, closed when the test ends.
func (h *harness) userClient(t *testing.T, user, password string) *clientv3.Client {
	t.Helper()
	return etcdtest.UserClient(t, h.cli.Endpoints(), user, password)
}
