package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// DefaultSessionTTL is the TTL of a session whose request names none.
const DefaultSessionTTL = 10

// sessionRequest is the body of POST /v1/sessions.
type sessionRequest struct {
	// TTL is the lease TTL in seconds; default DefaultSessionTTL.
	TTL int64 `json:"ttl"`
}

// SessionView is the answer to POST /v1/sessions.
type SessionView struct {
	// ID is the session handle; it is a secret.
	ID string `json:"id"`
	// TTL is the lease TTL in seconds: keep the session alive well within it.
	TTL int64 `json:"ttl"`
	// Principal owns the session.
	Principal string `json:"principal"`
}

// KeepAliveView is the answer to a keepalive.
type KeepAliveView struct {
	// TTL is the lease's TTL in seconds, counted from this keepalive.
	TTL int64 `json:"ttl"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, p *Principal) error {
	req := sessionRequest{TTL: DefaultSessionTTL}
	if err := decode(r, &req); err != nil {
		return err
	}
	ttl := time.Duration(req.TTL) * time.Second
	if ttl < coordinator.MinTTL || ttl > coordinator.MaxTTL {
		return fmt.Errorf("%w: ttl %d is outside %d..%d seconds", ErrInvalidInput, req.TTL, int64(coordinator.MinTTL/time.Second), int64(coordinator.MaxTTL/time.Second))
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	h, got, err := s.ss.create(ctx, p.Name, ttl)
	if err != nil {
		return err
	}
	s.log.Debug("session created", "principal", p.Name, "lease", fmt.Sprintf("%016x", int64(h.lease)))
	writeJSON(w, http.StatusCreated, SessionView{ID: h.String(), TTL: int64(got / time.Second), Principal: p.Name})
	return nil
}

// ownSession parses the handle and checks that it is p's live session.
func (s *Server) ownSession(r *http.Request, p *Principal, raw string) (handle, error) {
	h, err := parseHandle(raw)
	if err != nil {
		return handle{}, err
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	return h, s.ss.verify(ctx, h, p.Name)
}

func (s *Server) keepAlive(w http.ResponseWriter, r *http.Request, p *Principal) error {
	h, err := s.ownSession(r, p, r.PathValue("session"))
	if err != nil {
		return err
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	ttl, err := s.ss.keepAlive(ctx, h)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, KeepAliveView{TTL: int64(ttl / time.Second)})
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, p *Principal) error {
	h, err := s.ownSession(r, p, r.PathValue("session"))
	if err != nil {
		return err
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	if err := s.ss.revoke(ctx, h); err != nil {
		return err
	}
	s.log.Debug("session deleted", "principal", p.Name, "lease", fmt.Sprintf("%016x", int64(h.lease)))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
