package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
)

// claimRequest is the body of POST /v1/pools/{pool}/claims.
type claimRequest struct {
	// Session is the handle from POST /v1/sessions. Required.
	Session string `json:"session"`
	// Tenant charges the seat to a tenant; see Principal.Tenants.
	Tenant string `json:"tenant"`
	// Instance binds the seat to the named instance.
	Instance string `json:"instance"`
	// Labels bind the seat to an instance carrying all of them.
	Labels map[string]string `json:"labels"`
	// Holder names the claimant for operators. Default: the principal.
	Holder string `json:"holder"`
	// Wait is how long to queue for a seat, in seconds; 0 answers at once.
	Wait float64 `json:"wait"`
}

// ClaimView is a granted seat.
type ClaimView struct {
	Pool   string `json:"pool"`
	Seat   int    `json:"seat"`
	Token  int64  `json:"token"`
	Holder string `json:"holder"`
	Tenant string `json:"tenant,omitempty"`
	// Instance and Address name the instance the seat is bound to, if any.
	Instance string            `json:"instance,omitempty"`
	Address  string            `json:"address,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pool := r.PathValue("pool")
	var req claimRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	opts, wait, err := s.claimOptions(p, req)
	if err != nil {
		return err
	}
	h, err := parseHandle(req.Session)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.timeout+wait)
	defer cancel()
	cctx, ccancel := ctx, context.CancelFunc(func() {})
	if wait > 0 {
		cctx, ccancel = context.WithTimeout(ctx, wait)
	}
	defer ccancel()
	var cl *coordinator.Claim
	err = s.withSession(ctx, h, p.Name, func(sess *coordinator.Session) (err error) {
		cl, err = s.co.Claim(cctx, sess, pool, opts...)
		return err
	})
	if err != nil {
		if wait > 0 && errors.Is(err, context.DeadlineExceeded) && cctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%w: no seat of pool %q within %v", ErrWaitTimeout, pool, wait)
		}
		return err
	}
	v := claimView(cl)
	cl.Detach() // the client holds it now; a release here uses it, elsewhere Adopt
	s.ss.remember(h.lease, cl)
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// claimOptions checks a claim request against p's grants.
func (s *Server) claimOptions(p *Principal, req claimRequest) ([]coordinator.ClaimOption, time.Duration, error) {
	tenant, err := p.tenantFor(req.Tenant)
	if err != nil {
		return nil, 0, err
	}
	maxWait := s.opts.maxWait.Seconds()
	if req.Wait < 0 || req.Wait > maxWait {
		return nil, 0, fmt.Errorf("%w: wait %v is outside 0..%v seconds", ErrInvalidInput, req.Wait, maxWait)
	}
	holder := req.Holder
	if holder == "" {
		holder = p.Name
	}
	if err := printable("holder", holder); err != nil {
		return nil, 0, err
	}
	for k, v := range req.Labels {
		if err := errors.Join(printable("label key", k), printable("label value", v)); err != nil {
			return nil, 0, err
		}
	}
	opts := []coordinator.ClaimOption{coordinator.WithHolder(holder)}
	if tenant != "" {
		opts = append(opts, coordinator.WithTenant(tenant))
	}
	if req.Instance != "" {
		opts = append(opts, coordinator.WithInstance(req.Instance))
	}
	if len(req.Labels) > 0 {
		opts = append(opts, coordinator.WithLabels(req.Labels))
	}
	wait := time.Duration(req.Wait * float64(time.Second))
	if wait > 0 {
		opts = append(opts, coordinator.WithWait())
	}
	return opts, wait, nil
}

func claimView(cl *coordinator.Claim) ClaimView {
	v := ClaimView{Pool: cl.Pool(), Seat: cl.Seat(), Token: cl.Token(), Holder: cl.Holder(), Tenant: cl.Tenant()}
	if in, ok := cl.Instance(); ok {
		v.Instance, v.Address, v.Labels = in.ID, in.Addr, in.Labels
	}
	return v
}

// seatRef is the seat, token and session of a release or a loss stream.
type seatRef struct {
	pool  string
	seat  int
	token int64
	h     handle
}

// parseSeatRef reads {pool}, {seat} and the token and session parameters.
func parseSeatRef(r *http.Request) (seatRef, error) {
	ref := seatRef{pool: r.PathValue("pool")}
	var err error
	if ref.seat, err = strconv.Atoi(r.PathValue("seat")); err != nil || ref.seat < 0 {
		return ref, fmt.Errorf("%w: seat %q is not a seat number", ErrInvalidInput, shorten(r.PathValue("seat")))
	}
	q := r.URL.Query()
	if ref.token, err = strconv.ParseInt(q.Get("token"), 10, 64); err != nil || ref.token <= 0 {
		return ref, fmt.Errorf("%w: token %q: want the positive token the claim returned", ErrInvalidInput, shorten(q.Get("token")))
	}
	ref.h, err = parseHandle(q.Get("session"))
	return ref, err
}

// adopt finds the claim that ref names, held by the caller's session, and
// the borrowed session. Call done when finished with the claim.
func (s *Server) adopt(ctx context.Context, p *Principal, ref seatRef) (*coordinator.Claim, *coordinator.Session, func(), error) {
	var cl *coordinator.Claim
	var sess *coordinator.Session
	err := s.withSession(ctx, ref.h, p.Name, func(bs *coordinator.Session) (err error) {
		sess = bs
		cl, err = s.co.Adopt(ctx, bs, ref.pool, ref.seat, ref.token)
		return notHeldBy(ref, err)
	})
	if err != nil {
		return nil, nil, nil, err
	}
	done := s.ss.hold(ref.h.lease, sess)
	return cl, sess, func() { cl.Detach(); done() }, nil
}

// notHeldBy words Adopt's refusal of a seat that ref's session does not
// hold under ref's token with ref's own data alone. Adopt's message names
// the token and lease the seat is held under: another holder's, which a
// claimant may not read (a worker that fences by token takes the token
// as a credential). The codes stay: stale_token, not_held.
func notHeldBy(ref seatRef, err error) error {
	switch {
	case errors.Is(err, coordinator.ErrStaleToken):
		return fmt.Errorf("%w: pool %q seat %d is not held under token %d", coordinator.ErrStaleToken, ref.pool, ref.seat, ref.token)
	case errors.Is(err, coordinator.ErrNotHeld):
		return fmt.Errorf("%w: pool %q seat %d is not held by session %016x under token %d", coordinator.ErrNotHeld, ref.pool, ref.seat, int64(ref.h.lease), ref.token)
	}
	return err
}

func (s *Server) release(w http.ResponseWriter, r *http.Request, p *Principal) error {
	ref, err := parseSeatRef(r)
	if err != nil {
		return err
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	// A claim this replica granted is released in one txn, fenced by its
	// token (the seat key made at that revision is bound to the session's
	// lease); any other is found with Adopt first.
	if err := s.ss.verify(ctx, ref.h, p.Name); err != nil {
		return err
	}
	cl := s.ss.take(ref.h.lease, claimID{ref.pool, ref.seat, ref.token})
	if cl == nil {
		var done func()
		var err error
		if cl, _, done, err = s.adopt(ctx, p, ref); err != nil {
			return s.sessionGoneOr(ctx, ref.h.lease, err)
		}
		defer done()
	}
	if err := cl.ReleaseBy(ctx, p.Name); err != nil {
		return s.sessionGoneOr(ctx, ref.h.lease, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sessionGoneOr returns err, a release's ErrNotHeld, as ErrSessionGone when
// the session's lease is gone, as a replica that did not cache the session
// says it (verify); and forgets the session. Found by a review
// (2026-12-05): after the lease expired, the replica that granted the seat
// answered not_held and the others session_gone.
func (s *Server) sessionGoneOr(ctx context.Context, lease clientv3.LeaseID, err error) error {
	if !errors.Is(err, coordinator.ErrNotHeld) {
		return err
	}
	if alive, aerr := s.ss.alive(ctx, lease); aerr != nil || alive {
		return err
	}
	s.ss.drop(lease)
	return fmt.Errorf("%w: session %016x expired or was deleted", ErrSessionGone, int64(lease))
}
