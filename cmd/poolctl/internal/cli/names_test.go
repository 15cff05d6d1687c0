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
			`poolctl: pool: invalid argument: name "a/b" has '/'; use printable ASCII without '/' or spaces`},
		{"space in pool", []string{"pool", "create", "a b", "--capacity", "1"},
			`poolctl: pool: invalid argument: name "a b" has ' '; use printable ASCII without '/' or spaces`},
		{"long pool", []string{"watch", long},
			`poolctl: pool: invalid argument: name "` + long[:64] + `…(129 bytes)" must be 1..128 characters`},
		{"huge pool", []string{"seats", strings.Repeat("y", 10000)},
			`poolctl: pool: invalid argument: name "` + strings.Repeat("y", 64) + `…(10000 bytes)" must be 1..128 characters`},
		{"dot pool", []string{"pool", "create", ".", "--capacity", "1"},
			`poolctl: pool: invalid argument: name "." is reserved`},
		{"dot-dot pool", []string{"seats", ".."},
			`poolctl: pool: invalid argument: name ".." is reserved`},
		{"escape in holder", []string{"run", "p", "--holder", "me\x1b[2J", "--", "true"},
			`poolctl: --holder: control or invisible character U+001B at byte 2; use printable text`},
		{"bidi override in reason", []string{"release", "p", "0", "--force", "--reason", "ok\u202e"},
			`poolctl: --reason: control or invisible character U+202E at byte 2; use printable text`},
		{"huge reason", []string{"release", "p", "0", "--force", "--reason", strings.Repeat("r", 100000)},
			`poolctl: --reason: 100000 bytes; at most 1024`},
		{"bad tenant", []string{"run", "p", "--tenant", "t/1", "--", "true"},
			`poolctl: tenant: invalid argument: name "t/1" has '/'; use printable ASCII without '/' or spaces`},
		{"bad instance", []string{"drain", "p", "é"},
			`poolctl: instance: invalid argument: name "é" has 'é'; use printable ASCII without '/' or spaces`},
		{"bad prefix", []string{"--prefix", "etcdpool/", "status"},
			`poolctl: --prefix: invalid argument: prefix "etcdpool/" must start with '/', not end with '/', and be at most 256 bytes`},
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
