package roles

import (
	"strings"
	"testing"
)

func TestNamesAndCommands(t *testing.T) {
	tests := []struct {
		root, pool string
		actor      Actor
		want       string
	}{
		{"/etcdpool", "gpu", Claimant, "etcdpool-gpu-claimant"},
		{"/etcdpool", "gpu", Agent, "etcdpool-gpu-agent"},
		{"/etcdpool", "", Operator, "etcdpool-operator"},
		{"/team/a", "gpu", Claimant, "etcdpool-team-a-gpu-claimant"},
		{"/team/a", "", Viewer, "etcdpool-team-a-viewer"},
	}
	for _, tt := range tests {
		if got := Name(tt.root, tt.pool, tt.actor); got != tt.want {
			t.Errorf("Name(%q, %q, %s) = %q, want %q", tt.root, tt.pool, tt.actor, got, tt.want)
		}
	}
	cmds := Etcdctl("r", Permissions("/etcdpool", "g$x", Agent))
	if len(cmds) != 4 || !strings.Contains(cmds[3], "readwrite '/etcdpool/pools/g$x/instances/' --prefix=true") ||
		!strings.HasSuffix(cmds[2], "read /etcdpool/healthz") {
		t.Errorf("etcdctl commands:\n%s", strings.Join(cmds, "\n"))
	}
	if _, err := Parse("admin"); err == nil || !strings.Contains(err.Error(), "claimant, agent, operator, viewer") {
		t.Errorf("Parse(admin) = %v", err)
	}
	for _, a := range Actors {
		if got, err := Parse(string(a)); err != nil || got != a {
			t.Errorf("Parse(%s) = %v, %v", a, got, err)
		}
		if len(Permissions("/etcdpool", "p", a)) == 0 {
			t.Errorf("%s has no permissions", a)
		}
	}
}
