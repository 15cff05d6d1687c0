package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// Exit codes. They form one table, exitCodes below, which the help text
// and the README print; ExitCode is the only place that maps errors to them.
const (
	// ExitOK is success.
	ExitOK = 0
	// ExitError is any error not listed below.
	ExitError = 1
	// ExitUsage is bad usage or input.
	ExitUsage = 2
	// ExitConflict is a conflict: stale token, pool exists or in use, CAS lost.
	ExitConflict = 3
	// ExitUnreachable is an etcd that could not be reached or did not answer.
	ExitUnreachable = 4
	// ExitNotFound is a pool, seat or instance that does not exist.
	ExitNotFound = 5
	// ExitTimeout is run finding no seat within --wait.
	ExitTimeout = 6
	// ExitSeatLost is run losing its seat while the command ran.
	ExitSeatLost = 7
	// ExitDenied is etcd refusing the request: permission denied by its
	// RBAC, or authentication failed.
	ExitDenied = 8
	// ExitCannotExec is run's command found but not executable (the
	// shell's 126).
	ExitCannotExec = 126
	// ExitCommandNotFound is run's command not found (the shell's 127).
	ExitCommandNotFound = 127
	// ExitInterrupted is a signal before run started its command.
	ExitInterrupted = 130
)

// exitCodes documents every exit code, in order.
var exitCodes = []struct {
	Code    int
	Meaning string
}{
	{ExitOK, "success"},
	{ExitError, "any other error"},
	{ExitUsage, "bad usage or input: unknown flag, missing argument, invalid name, capacity, duration or token"},
	{ExitConflict, "conflict: stale token, pool already exists, pool in use, concurrent modification"},
	{ExitUnreachable, "etcd unreachable: no connection within --dial-timeout (a TLS failure names its cause), or no answer within --command-timeout"},
	{ExitNotFound, "not found: pool, seat or instance"},
	{ExitTimeout, "timed out waiting: run found no seat within --wait (or at once with --no-wait, or never can: a denied tenant); drain --wait: seats still held after --timeout; explain: the claim would not be granted now"},
	{ExitSeatLost, "run: the seat was lost while the command ran (force-release, lease loss, instance gone, pool deleted); the command was stopped"},
	{ExitDenied, "denied: etcd refused the request (permission denied by RBAC, or authentication failed); see `poolctl roles`"},
	{ExitCannotExec, "run: the command was found but cannot be executed (not executable, a directory, bad format)"},
	{ExitCommandNotFound, "run: the command was not found (not in PATH, or no such file)"},
	{ExitInterrupted, "interrupted by SIGINT, SIGTERM or SIGHUP before run started its command"},
}

// Errors poolctl raises itself. Their messages are the whole story; the
// exit code comes from ExitCode.
var (
	// errUsage marks bad usage or input.
	errUsage = errors.New("usage")
	// errUnreachable marks an etcd that did not answer in time.
	errUnreachable = errors.New("etcd unreachable")
	// errWaitTimedOut is the cause of a claim whose --wait ran out.
	errWaitTimedOut = errors.New("no seat within --wait")
	// errCannotExec marks a command of run that cannot be executed.
	errCannotExec = errors.New("cannot execute")
	// errCommandNotFound marks a command of run that does not exist.
	errCommandNotFound = errors.New("command not found")
	// errSeatLost marks a run whose seat was lost while its command ran.
	errSeatLost = errors.New("seat lost")
	// errRan marks an error returned by a command's RunE rather than by
	// cobra's parsing.
	errRan = errors.New("command failed")
	// errSilent marks an error already reported (or a plain exit status of
	// run's command): Main prints nothing.
	errSilent = errors.New("silent")
)

// classed is an error whose message is err's alone but which also matches
// class (one of the sentinels above) with errors.Is.
type classed struct{ class, err error }

func (e classed) Error() string   { return e.err.Error() }
func (e classed) Unwrap() []error { return []error{e.class, e.err} }

// classify marks err as belonging to class without changing its message.
func classify(class, err error) error { return classed{class: class, err: err} }

// usageError formats a message as bad usage (exit 2).
func usageError(format string, args ...any) error {
	return classify(errUsage, fmt.Errorf(format, args...))
}

// exitStatus is run's pass-through of its command's exit code.
type exitStatus struct{ code int }

func (e exitStatus) Error() string { return fmt.Sprintf("command exited with status %d", e.code) }
func (e exitStatus) Unwrap() error { return errSilent }

// ExitCode maps an error to the process exit code. It is the only place
// that does: commands return wrapped errors and never pick codes.
func ExitCode(err error) int {
	var st exitStatus
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &st):
		return st.code
	case errors.Is(err, errSeatLost):
		return ExitSeatLost
	case errors.Is(err, errCommandNotFound):
		return ExitCommandNotFound
	case errors.Is(err, errCannotExec):
		return ExitCannotExec
	case errors.Is(err, errWaitTimedOut), errors.Is(err, coordinator.ErrNoSeat):
		return ExitTimeout
	case errors.Is(err, errInterrupted), errors.Is(err, context.Canceled):
		return ExitInterrupted
	case etcdclient.Denied(err):
		return ExitDenied
	case errors.Is(err, errUsage), errors.Is(err, coordinator.ErrInvalid):
		return ExitUsage
	case errors.Is(err, coordinator.ErrStaleToken), errors.Is(err, coordinator.ErrConflict),
		errors.Is(err, coordinator.ErrPoolExists), errors.Is(err, coordinator.ErrPoolInUse):
		return ExitConflict
	case errors.Is(err, coordinator.ErrPoolNotFound), errors.Is(err, coordinator.ErrSeatNotFound),
		errors.Is(err, coordinator.ErrInstanceNotFound):
		return ExitNotFound
	case unreachable(err):
		return ExitUnreachable
	}
	return ExitError
}

// unreachable reports errors that mean etcd could not be reached or did not
// answer: our own dial check, or an error etcdclient.Classify finds
// transient (Unavailable, no leader) or ambiguous (a deadline).
func unreachable(err error) bool {
	if errors.Is(err, errUnreachable) || errors.Is(err, etcdclient.ErrUnreachable) {
		return true
	}
	var ec interface{ Code() codes.Code }
	if errors.As(err, &ec) || isStatus(err) {
		c := etcdclient.Classify(err)
		return c == etcdclient.Transient || c == etcdclient.Ambiguous
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// isStatus reports an error that carries a gRPC status.
func isStatus(err error) bool {
	_, ok := status.FromError(err)
	return ok
}

// exitCodeHelp renders the exit code table for the help text.
func exitCodeHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "  %3d  %s\n", e.Code, e.Meaning)
	}
	b.WriteString("  `run` otherwise exits with its command's own exit code (128+N if killed by signal N).\n")
	return b.String()
}
