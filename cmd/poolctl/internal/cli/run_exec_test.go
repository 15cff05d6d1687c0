//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestRunCommandExitCodes checks the shell's codes for a command that
// cannot run: 127 when there is no such command, 126 when it exists but
// cannot be executed, both before a seat is claimed (PATH lookup) and when
// the exec itself fails (the seat is then released).
func TestRunCommandExitCodes(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 1})
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(plain, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Executable bits but no #! and not a binary: execve says ENOEXEC.
	if err := os.WriteFile(garbage, []byte{0x7f, 'E', 'L', 'F', 0, 0, 0}, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cmd string
		code      int
		says      string
	}{
		{"not in PATH", "no-such-command-xyz", ExitCommandNotFound, "not found"},
		{"no such file", "/nonexistent/cmd", ExitCommandNotFound, "not found"},
		{"not executable", plain, ExitCannotExec, "cannot execute"},
		{"a directory", dir, ExitCannotExec, "cannot execute"},
		{"exec format error", garbage, ExitCannotExec, "cannot execute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run("run", "p", "--", tt.cmd)
			r.want(t, tt.code)
			if !strings.Contains(r.err, tt.says) {
				t.Errorf("stderr %q does not say %q", r.err, tt.says)
			}
			if seats, err := h.c.Seats(testkit.Ctx(t, 5*time.Second), "p"); err != nil || len(seats) != 0 {
				t.Errorf("seats after a failed start: %+v %v, want none", seats, err)
			}
		})
	}
}
