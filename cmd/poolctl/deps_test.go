package main

import (
	"debug/buildinfo"
	"os/exec"
	"strings"
	"testing"
)

// forbidden is what poolctl must not link: the etcd server (an embedded
// etcd belongs in poolagent dev and in tests, never in the operator CLI).
const forbidden = "go.etcd.io/etcd/server"

// TestNoServerDeps lists poolctl's package dependencies.
func TestNoServerDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !contains(deps, "go.etcd.io/etcd/client/v3") {
		t.Fatalf("go list -deps does not show the etcd client; is the check looking at the right package?\n%s", out)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, forbidden) {
			t.Errorf("poolctl depends on %s", d)
		}
	}
}

// checkBuildInfo reads the modules linked into a built binary.
func checkBuildInfo(t *testing.T, bin string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, d := range bi.Deps {
		mods = append(mods, d.Path)
		if strings.HasPrefix(d.Path, forbidden) {
			t.Errorf("the poolctl binary links %s %s", d.Path, d.Version)
		}
	}
	if !contains(mods, "go.etcd.io/etcd/client/v3") {
		t.Fatalf("build info lists no etcd client; modules: %v", mods)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
