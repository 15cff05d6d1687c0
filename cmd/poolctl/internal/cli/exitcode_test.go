package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdpool/etcdpool/coordinator"
)

func TestExitCode(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("seats of %q: %w", "p", err) }
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"plain", errors.New("boom"), ExitError},
		{"bad spec in etcd", wrap(coordinator.ErrBadSpec), ExitError},
		{"usage", usageError("--capacity 0"), ExitUsage},
		{"invalid argument", wrap(coordinator.ErrInvalid), ExitUsage},
		{"stale token", wrap(coordinator.ErrStaleToken), ExitConflict},
		{"conflict", wrap(coordinator.ErrConflict), ExitConflict},
		{"pool exists", wrap(coordinator.ErrPoolExists), ExitConflict},
		{"pool in use", wrap(coordinator.ErrPoolInUse), ExitConflict},
		{"dial check", classify(errUnreachable, errors.New("no connection")), ExitUnreachable},
		{"request deadline", wrap(context.DeadlineExceeded), ExitUnreachable},
		{"grpc unavailable", status.Error(codes.Unavailable, "connection refused"), ExitUnreachable},
		{"wrapped grpc unavailable", wrap(status.Error(codes.Unavailable, "x")), ExitUnreachable},
		{"no leader", wrap(rpctypes.ErrNoLeader), ExitUnreachable},
		{"pool not found", wrap(coordinator.ErrPoolNotFound), ExitNotFound},
		{"seat not found", wrap(coordinator.ErrSeatNotFound), ExitNotFound},
		{"instance not found", wrap(coordinator.ErrInstanceNotFound), ExitNotFound},
		{"wait ran out", classify(errWaitTimedOut, errors.New("no seat")), ExitTimeout},
		{"wait cause beats deadline", classify(errWaitTimedOut, context.DeadlineExceeded), ExitTimeout},
		{"no seat now", wrap(coordinator.ErrNoSeat), ExitTimeout},
		{"seat lost", classify(errSeatLost, coordinator.ErrForceReleased), ExitSeatLost},
		{"interrupted", interruptError{sig: os.Interrupt}, ExitInterrupted},
		{"command status", classify(errRan, exitStatus{code: 42}), 42},
		{"auth failed", rpctypes.ErrAuthFailed, ExitDenied},
		{"permission denied", wrap(rpctypes.ErrPermissionDenied), ExitDenied},
		{"grpc permission denied", status.Error(codes.PermissionDenied, "x"), ExitDenied},
		{"too many ops", wrap(rpctypes.ErrTooManyOps), ExitError},
		{"etcd timeout", wrap(rpctypes.ErrTimeout), ExitUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

// TestExitCodeTableDocumented keeps the help text, the README section and
// the constants in step.
func TestExitCodeTableDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	help := exitCodeHelp()
	for _, e := range exitCodes {
		row := regexp.MustCompile(fmt.Sprintf(`(?m)^\| *%d *\|`, e.Code))
		if !row.Match(readme) {
			t.Errorf("README.md has no table row for exit code %d", e.Code)
		}
		if !strings.Contains(help, fmt.Sprintf("%3d  %s", e.Code, e.Meaning)) {
			t.Errorf("help text lacks exit code %d", e.Code)
		}
	}
	for _, c := range []int{ExitOK, ExitError, ExitUsage, ExitConflict, ExitUnreachable, ExitNotFound, ExitTimeout, ExitSeatLost, ExitDenied, ExitInterrupted} {
		found := false
		for _, e := range exitCodes {
			found = found || e.Code == c
		}
		if !found {
			t.Errorf("exit code %d is not in the documented table", c)
		}
	}
}

func TestMessageIsOneLine(t *testing.T) {
	err := fmt.Errorf("coordinator: read pool %q: %w", "p", errors.New("etcdserver: a\nb"))
	if got, want := Message(err), `read pool "p": a b`; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
}
