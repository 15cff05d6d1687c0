package command

import (
	"errors"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
)

// Exit codes, the one table for every subcommand.
const (
	// ExitOK: success, including a clean shutdown on SIGINT, SIGTERM or
	// SIGHUP.
	ExitOK = 0
	// ExitError: a runtime error (etcd unreachable at a point that needs
	// it, a port in use, no seat within the wait timeout), or etcd refusing
	// for good at start (TLS failure, authentication failed, permission
	// denied; see startupCheck).
	ExitError = 1
	// ExitUsage: bad configuration, flags or arguments.
	ExitUsage = 2
	// ExitSeatLost: the sidecar lost its seat (lease lost, force-released,
	// instance gone, pool deleted); the kubelet should restart it.
	ExitSeatLost = 3
)

// usageError marks an error in the command line itself.
type usageError struct{ err error }

// Error implements error.
func (e usageError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e usageError) Unwrap() error { return e.err }

// ExitCode maps an error returned by a command to its exit code.
func ExitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, config.ErrInvalid), errors.As(err, &ue):
		return ExitUsage
	case errors.Is(err, agent.ErrSeatLost):
		return ExitSeatLost
	}
	return ExitError
}
