package main

import (
	"debug/buildinfo"
	"strings"
	"testing"
)

// forbidden is what the poolctl binary must not link: the etcd server.
// internal/layering checks the package graph with the same rule and its
// reason; checkBuildInfo checks the binary the e2e tests build.
const forbidden = "go.etcd.io/etcd/server"

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
