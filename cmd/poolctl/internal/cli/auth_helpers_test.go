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

// loginTimeouts are the flags of a poolctl run that logs in. A login is a
// bcrypt check on the server, and it counts against --command-timeout
// (which bounds a whole command, connecting included): under -race on a
// loaded 2-core machine one took over 5 s, the default (CI, stop 23). A
// denial that poolctl retried instead of ending would still run into the
// timeout and exit 4, not 8.
func loginTimeouts(args ...string) []string {
	return append([]string{"--dial-timeout", "10s", "--command-timeout", "30s"}, args...)
}
