package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Read endpoints: each needs the read operation on the pool. Leases are
// shown as 16 hex digits; they are not session handles (those need the
// secret).

// SeatView is a held seat.
type SeatView struct {
	Seat      int       `json:"seat"`
	Token     int64     `json:"token"`
	Holder    string    `json:"holder"`
	Tenant    string    `json:"tenant,omitempty"`
	Instance  string    `json:"instance,omitempty"`
	Lease     string    `json:"lease"`
	ClaimedAt time.Time `json:"claimedAt"`
	// TTL is the lease's time left in seconds; -1 if unknown.
	TTL int64 `json:"ttl"`
}

// WaiterView is one entry of a pool's queue; position 0 is the head.
type WaiterView struct {
	Position int               `json:"position"`
	Holder   string            `json:"holder"`
	Tenant   string            `json:"tenant,omitempty"`
	Instance string            `json:"instance,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Lease    string            `json:"lease"`
	Since    time.Time         `json:"since"`
}

// InstanceView is a registered instance.
type InstanceView struct {
	ID      string            `json:"id"`
	Address string            `json:"address,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Seats   int               `json:"seats"`
	State   string            `json:"state"`
	Agent   string            `json:"agent,omitempty"`
}

func leaseHex(id int64) string { return fmt.Sprintf("%016x", id) }

func seatView(st coordinator.Seat) SeatView {
	ttl := int64(-1)
	if st.TTL >= 0 {
		ttl = int64(st.TTL / time.Second)
	}
	return SeatView{Seat: st.Seat, Token: st.Token, Holder: st.Holder, Tenant: st.Tenant, Instance: st.Instance,
		Lease: leaseHex(int64(st.Lease)), ClaimedAt: st.ClaimedAt, TTL: ttl}
}

func instanceView(in coordinator.Instance) InstanceView {
	return InstanceView{ID: in.ID, Address: in.Addr, Labels: in.Labels, Seats: in.Seats, State: string(in.State), Agent: in.Agent}
}

func (s *Server) listPools(w http.ResponseWriter, r *http.Request, p *Principal) error {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	all, err := s.co.ListPools(ctx)
	if err != nil {
		return err
	}
	out := []coordinator.PoolStatus{}
	for _, ps := range all {
		if p.poolAllowed(ps.Name) {
			out = append(out, ps)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getPool(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pool := r.PathValue("pool")
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	st, err := s.co.PoolStatus(ctx, pool)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) listSeats(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pool := r.PathValue("pool")
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	seats, err := s.co.Seats(ctx, pool)
	if err != nil {
		return err
	}
	out := make([]SeatView, 0, len(seats))
	for _, st := range seats {
		out = append(out, seatView(st))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listQueue(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pool := r.PathValue("pool")
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	q, err := s.co.Queue(ctx, pool)
	if err != nil {
		return err
	}
	out := make([]WaiterView, 0, len(q))
	for _, wt := range q {
		out = append(out, WaiterView{Position: wt.Position, Holder: wt.Holder, Tenant: wt.Tenant, Instance: wt.Instance,
			Labels: wt.Labels, Lease: leaseHex(int64(wt.Lease)), Since: wt.Since})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listInstances(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pool := r.PathValue("pool")
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	ins, err := s.co.Instances(ctx, pool)
	if err != nil {
		return err
	}
	out := make([]InstanceView, 0, len(ins))
	for _, in := range ins {
		out = append(out, instanceView(in))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// events is GET /v1/pools/{pool}/events: the pool's events
// (coordinator.Watch) as server-sent events, named by their type, until
// the client goes away.
func (s *Server) events(w http.ResponseWriter, r *http.Request, p *Principal) error {
	pool := r.PathValue("pool")
	if err := coordinator.ValidateName(pool); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	events := s.co.Watch(r.Context(), pool)
	e := startSSE(w)
	tick := time.NewTicker(pingInterval)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok || e.send(string(ev.Type), ev) != nil {
				return nil
			}
		case <-tick.C:
			if e.ping() != nil {
				return nil
			}
		}
	}
}
