//go:build !linux

package cli

import (
	"fmt"
	"os"
)

// guardArg is the hidden first argument of the guard process, which only
// Linux has.
const guardArg = "__guard"

// runGuard refuses: there is no guard process on this platform.
func runGuard([]string) int {
	fmt.Fprintln(os.Stderr, "poolctl: the guard process needs Linux")
	return ExitError
}
