package cli

import (
	"syscall"
	"unsafe"
)

// clockMonotonic is CLOCK_MONOTONIC from linux/time.h.
const clockMonotonic = 1

// monoNow reads CLOCK_MONOTONIC in nanoseconds: one clock for every
// process of the machine, which wall-clock steps do not move. poolctl and
// its guard tell each other times on it (guard_linux.go: "until").
func monoNow() int64 {
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic("clock_gettime(CLOCK_MONOTONIC): " + e.Error()) // cannot fail on Linux
	}
	return ts.Nano()
}
