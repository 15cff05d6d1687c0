//go:build unix

package testkit

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// PidGone reports whether process pid no longer runs. An orphan that
// exited stays a zombie until init reaps it, and some container inits
// never do, so a zombie counts as gone.
func PidGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}
