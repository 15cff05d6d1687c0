package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Operator endpoints: force-release, drain, and pool creation and update
// (admin). The release record of a force-release names the principal.

// forceReleaseRequest is the body of a force-release.
type forceReleaseRequest struct {
	// Token is the seat's current token (GET .../seats). Required.
	Token int64 `json:"token"`
	// Reason is recorded and shown to the holder. Required.
	Reason string `json:"reason"`
}

func (s *Server) forceRelease(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pool := r.PathValue("pool")
	seat, err := strconv.Atoi(r.PathValue("seat"))
	if err != nil || seat < 0 {
		return fmt.Errorf("%w: seat %q is not a seat number", ErrInvalidInput, shorten(r.PathValue("seat")))
	}
	var req forceReleaseRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Token <= 0 || req.Reason == "" || len(req.Reason) > 1024 {
		return fmt.Errorf("%w: give the seat's token and a reason (1..1024 bytes)", ErrInvalidInput)
	}
	if err := printable("reason", req.Reason); err != nil {
		return err
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	st, err := s.forceReleaseBy(ctx, pool, seat, req.Token, req.Reason, p.Name)
	if err != nil {
		return err
	}
	s.log.Info("seat force-released through the API", "pool", pool, "seat", seat, "token", req.Token, "by", p.Name)
	writeJSON(w, http.StatusOK, seatView(st))
	return nil
}

func (s *Server) drain(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pool, id := r.PathValue("pool"), r.PathValue("instance")
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	in, err := s.co.SetInstanceState(ctx, pool, id, coordinator.InstanceDraining)
	if err != nil {
		return err
	}
	s.log.Info("instance drained through the API", "pool", pool, "instance", id, "by", p.Name)
	writeJSON(w, http.StatusOK, instanceView(in))
	return nil
}

// putPool creates the pool with the spec in the body, or replaces the
// spec of an existing pool (compare-and-swap on its revision, retried on a
// concurrent change). 201 when created, 200 when updated.
func (s *Server) putPool(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pool := r.PathValue("pool")
	var spec coordinator.PoolSpec
	if err := decode(r, &spec); err != nil {
		return err
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	for {
		created, err := s.upsertPool(ctx, pool, spec)
		if errors.Is(err, coordinator.ErrConflict) || errors.Is(err, coordinator.ErrPoolExists) {
			continue // a concurrent change: read again
		}
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		writeJSON(w, status, spec)
		return nil
	}
}

// upsertPool makes one attempt to create or update the pool. A spec in
// etcd that does not decode (written by hand) is replaced as any other,
// compared by its revision: PUT is how an admin repairs it (found by a
// review, 2026-12-05: it answered 500).
func (s *Server) upsertPool(ctx context.Context, pool string, spec coordinator.PoolSpec) (created bool, err error) {
	cur, err := s.co.GetPool(ctx, pool)
	switch {
	case errors.Is(err, coordinator.ErrPoolNotFound):
		_, err = s.co.CreatePool(ctx, pool, spec)
		return true, err
	case errors.Is(err, coordinator.ErrBadSpec) && cur.Revision > 0:
	case err != nil:
		return false, err
	}
	_, err = s.co.UpdatePool(ctx, pool, spec, cur.Revision)
	return false, err
}

// forceReleaseBy frees a seat held under token, whoever holds it,
// recording by: it borrows the holder's lease, adopts the claim and
// force-releases it (the release txn is fenced by the token). It returns
// the seat as it was.
func (s *Server) forceReleaseBy(ctx context.Context, pool string, seat int, token int64, reason, by string) (coordinator.Seat, error) {
	cur, err := s.co.Seat(ctx, pool, seat)
	if err != nil {
		return cur, err
	}
	if cur.Token != token {
		return cur, fmt.Errorf("%w: pool %q seat %d is held under token %d, not %d", coordinator.ErrStaleToken, pool, seat, cur.Token, token)
	}
	holder, err := coordinator.BorrowSession(ctx, s.cli, cur.Lease)
	if errors.Is(err, coordinator.ErrSessionExpired) {
		return cur, fmt.Errorf("%w: pool %q seat %d: its holder's session is ending", coordinator.ErrNotHeld, pool, seat)
	}
	if err != nil {
		return cur, err
	}
	defer holder.Close(ctx) // borrowed: the holder's lease is not revoked
	cl, err := s.co.Adopt(ctx, holder, pool, seat, token)
	if err != nil {
		return cur, err
	}
	if err := cl.ForceReleaseBy(ctx, reason, by); err != nil {
		cl.Detach()
		return cur, err
	}
	return cur, nil
}
