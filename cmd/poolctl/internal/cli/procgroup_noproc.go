//go:build unix && !linux

package cli

import "syscall"

// groupAlive reports whether any process of group pgid still exists.
// Without /proc, zombies count as alive until reaped.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) != syscall.ESRCH
}
