package httpapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Every error maps to one status and code, wrapped or not.
func TestStatusOf(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{&coordinator.NoSeatError{Pool: "p", Reason: coordinator.WaitTenantLimit}, 409, CodeNoSeat},
		{ErrInvalidInput, 400, CodeInvalidInput},
		{coordinator.ErrInvalid, 400, CodeInvalidInput},
		{ErrUnauthenticated, 401, CodeUnauthenticated},
		{ErrForbidden, 403, CodeForbidden},
		{coordinator.ErrNotHeld, 404, CodeNotHeld},
		{coordinator.ErrSeatNotFound, 404, CodeNotHeld},
		{coordinator.ErrPoolNotFound, 404, CodeNotFound},
		{coordinator.ErrInstanceNotFound, 404, CodeNotFound},
		{ErrWaitTimeout, 408, CodeWaitTimeout},
		{coordinator.ErrConflict, 409, CodeConflict},
		{ErrSessionGone, 410, CodeSessionGone},
		{coordinator.ErrSessionExpired, 410, CodeSessionGone},
		{coordinator.ErrStaleToken, 412, CodeStaleToken},
		{context.DeadlineExceeded, 503, CodeUnavailable},
		{ErrUnavailable, 503, CodeUnavailable},
		{status.Error(codes.Unavailable, "no leader"), 503, CodeUnavailable},
		{rpctypes.ErrTimeout, 503, CodeUnavailable},
		{rpctypes.ErrNoLeader, 503, CodeUnavailable},
		{errors.New("boom"), 500, CodeInternal},
	}
	for _, c := range cases {
		for _, err := range []error{c.err, fmt.Errorf("context: %w", c.err)} {
			got, body := statusOf(err)
			if got != c.status || body.Code != c.code || body.Message == "" {
				t.Errorf("statusOf(%v) = %d %+v, want %d %s", err, got, body, c.status, c.code)
			}
		}
	}
	if _, b := statusOf(&coordinator.NoSeatError{Reason: coordinator.WaitPoolFull}); b.Reason != "pool_full" {
		t.Errorf("no_seat reason = %q", b.Reason)
	}
}

// TestStatusOfTransient: etcd turning requests away for a while (too many
// requests) is 503, retry, not 500. Found by a review (2026-12-05).
func TestStatusOfTransient(t *testing.T) {
	for _, err := range []error{rpctypes.ErrTooManyRequests, status.Error(codes.ResourceExhausted, "etcdserver: too many requests")} {
		if st, b := statusOf(fmt.Errorf("coordinator: claim: %w", err)); st != 503 {
			t.Errorf("statusOf(%v) = %d %s, want 503 unavailable", err, st, b.Code)
		}
	}
}
