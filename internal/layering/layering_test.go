package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is this module's path; rules name packages relative to it.
const module = "github.com/etcdpool/etcdpool"

// forbid is one import a package must not depend on, directly or not.
type forbid struct {
	prefix string // import path prefix
	why    string
}

// rules maps a package to what it must not link, outside its tests
// (`go list -deps` without -test). Each package also names a dependency it
// must show, so that an empty or wrong listing cannot pass.
var rules = []struct {
	pkg    string
	sanity string // a dependency the package surely has
	forbid []forbid
}{
	{
		pkg:    "coordinator",
		sanity: "go.etcd.io/etcd/client/v3",
		forbid: []forbid{
			{"github.com/prometheus/", "the library reports through its small Metrics interface; Prometheus is wired in by the binaries (internal/metrics)"},
			{"github.com/spf13/cobra", "a library has no command line; flags belong to cmd/"},
			{"k8s.io/", "the coordinator runs anywhere etcd does; Kubernetes wiring lives in deploy/ and the agent's config"},
			{"sigs.k8s.io/", "as k8s.io/: no Kubernetes in the library"},
			{"go.etcd.io/etcd/server", "a client library must not link an etcd server; tests start one through internal/etcdtest"},
		},
	},
	{
		pkg:    "agent",
		sanity: module + "/coordinator",
		forbid: []forbid{
			{"github.com/spf13/cobra", "the agent is a library that poolagent's commands drive; the command line stays in cmd/poolagent"},
			{"go.etcd.io/etcd/server", "the agent talks to etcd as a client; only poolagent dev embeds a server"},
		},
	},
	{
		pkg:    "cmd/poolctl",
		sanity: "go.etcd.io/etcd/client/v3",
		forbid: []forbid{
			{"go.etcd.io/etcd/server", "the operator CLI is a client: an embedded etcd belongs in poolagent dev and in tests"},
		},
	},
	{
		pkg:    "config",
		sanity: module + "/coordinator",
		forbid: []forbid{
			{"github.com/spf13/cobra", "config takes a pflag.FlagSet; which commands exist is cmd/'s business"},
			{"go.etcd.io/etcd/server", "configuration is read without an etcd server"},
		},
	},
}

// TestLayering lists each package's dependencies and fails on every
// forbidden one, naming the dependency and the rule's reason.
func TestLayering(t *testing.T) {
	for _, r := range rules {
		t.Run(r.pkg, func(t *testing.T) {
			deps := listDeps(t, module+"/"+r.pkg)
			if !slices.Contains(deps, r.sanity) {
				t.Fatalf("go list -deps %s does not show %s; is the check looking at the right package?", r.pkg, r.sanity)
			}
			for _, f := range r.forbid {
				for _, d := range deps {
					if strings.HasPrefix(d, f.prefix) {
						t.Errorf("%s depends on %s: forbidden because %s", r.pkg, d, f.why)
						break
					}
				}
			}
		})
	}
}

func listDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}
