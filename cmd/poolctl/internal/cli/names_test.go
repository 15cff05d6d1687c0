package cli

import (
	"strings"
	"testing"
)

// TestBadNames checks that names and prefixes the coordinator would refuse
// are refused before connecting (the endpoint is dead), with exit code 2
// and one line naming the argument and saying what is wrong.
func TestBadNames(t *testing.T) {
	dead := deadEndpoint(t)
	long := strings.Repeat("x", 129)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"slash in pool", []string{"seats", "a/b"},
			`poolctl: pool name "a/b" has '/'; use printable ASCII without '/' or spaces`},
		{"space in pool", []string{"pool", "create", "a b", "--capacity", "1"},
			`poolctl: pool name "a b" has ' '; use printable ASCII without '/' or spaces`},
		{"long pool", []string{"watch", long},
			`poolctl: pool name "` + long + `" must be 1..128 characters`},
		{"bad tenant", []string{"run", "p", "--tenant", "t/1", "--", "true"},
			`poolctl: tenant name "t/1" has '/'; use printable ASCII without '/' or spaces`},
		{"bad instance", []string{"drain", "p", "é"},
			`poolctl: instance name "é" has 'é'; use printable ASCII without '/' or spaces`},
		{"bad prefix", []string{"--prefix", "etcdpool/", "status"},
			`poolctl: --prefix "etcdpool/" must start with '/', not end with '/', and be at most 256 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runArgs(newInvocation(), append([]string{"--endpoints", dead, "--dial-timeout", "300ms"}, tt.args...)...)
			r.want(t, ExitUsage)
			if got := strings.TrimSuffix(r.err, "\n"); got != tt.want {
				t.Errorf("stderr\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
