package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Streams are server-sent events (text/event-stream): "event: TYPE" and
// "data: JSON" lines, a blank line after each event, and a comment line
// every pingInterval so that idle proxies keep the connection.

// pingInterval is how often an idle stream sends a comment line.
const pingInterval = 15 * time.Second

// sseWriter writes server-sent events.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE sends the headers of an event stream.
func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	e := &sseWriter{w: w, rc: http.NewResponseController(w)}
	_ = e.rc.Flush()
	return e
}

// streamWriteTimeout bounds each write of a stream to its client. A client
// that stops reading and keeps the connection open is dropped then: until
// it is, the stream's events pile up in this process (the watch behind it
// buffers them), without bound. Found by a review (2026-12-05): a stalled
// reader of a busy pool's events held 22 MiB after 12,000 events, and
// growing (TestStalledStreamDropped).
var streamWriteTimeout = 30 * time.Second

// send writes one event and flushes it.
func (e *sseWriter) send(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.write(func() error {
		_, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, b)
		return err
	})
}

// ping writes a comment line.
func (e *sseWriter) ping() error {
	return e.write(func() error {
		_, err := fmt.Fprint(e.w, ": ping\n\n")
		return err
	})
}

// write runs f, which writes to the stream, and flushes, within
// streamWriteTimeout.
func (e *sseWriter) write(f func() error) error {
	_ = e.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) // not every writer has one (a test's recorder)
	if err := f(); err != nil {
		return err
	}
	return e.rc.Flush()
}

// LossView is the data of a "lost" event: why a seat was lost.
type LossView struct {
	Pool  string `json:"pool"`
	Seat  int    `json:"seat"`
	Token int64  `json:"token"`
	// Reason is released, expired, force_released, instance_gone,
	// pool_deleted or unknown (coordinator.Reason*); for a "closed" event,
	// server_closed or server_cut_off.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ReasonServerClosed is the reason of a "closed" event: the replica shut
// down and no longer watches the seat, which may still be held. Reconnect
// to another replica.
const ReasonServerClosed = "server_closed"

// serverClosedMsg is the message of a server_closed event.
const serverClosedMsg = "the server stopped watching the seat; it may still be held: reconnect"

// ErrServerStopping is the cause with which a server that embeds the API
// cancels its requests' contexts as it stops: a loss stream then ends with
// a "closed" event (server_closed) rather than just ending, as it does
// when its client goes away.
var ErrServerStopping = errors.New("httpapi: server stopping")

// ReasonServerCutOff is the reason of a "closed" event: the replica's copy
// of the session passed its local deadline (it could not follow the lease
// in time) and, asked then, etcd did not say the lease is gone: it did not
// answer, or the lease lives on. The seat may well still be held, the lease
// kept alive through another replica. Reconnect to another replica: it
// says "held" or the loss.
const ReasonServerCutOff = "server_cut_off"

// lossReason names why a claim ended.
func lossReason(err error) string {
	switch {
	case errors.Is(err, coordinator.ErrReleased):
		return coordinator.ReasonReleased
	case errors.Is(err, coordinator.ErrSessionExpired):
		return coordinator.ReasonExpired
	case errors.Is(err, coordinator.ErrForceReleased):
		return coordinator.ReasonForceReleased
	case errors.Is(err, coordinator.ErrInstanceGone):
		return coordinator.ReasonInstanceGone
	case errors.Is(err, coordinator.ErrPoolDeleted):
		return coordinator.ReasonPoolDeleted
	}
	return coordinator.ReasonUnknown
}

// leaseEnds reports, for a borrowed session that passed its local
// deadline, whether etcd says its lease is gone within the margin and a
// little more: the lease's own end, as when the client stops renewing.
// False when etcd does not answer (this replica is cut off) or the lease
// lives on (the client renews it through another replica).
func (s *Server) leaseEnds(ctx context.Context, sess *coordinator.Session) bool {
	ctx, cancel := context.WithTimeout(ctx, sess.Margin()+2*time.Second)
	defer cancel()
	for {
		alive, err := s.ss.alive(ctx, sess.Lease())
		switch {
		case err == nil && !alive:
			return true
		case err != nil && ctx.Err() != nil:
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lossStream is GET /v1/pools/{pool}/seats/{seat}/events: "held" at once,
// "draining" if the seat's instance starts draining meanwhile (the seat is
// still held: finish and release it) and "undrained" if it is made ready
// again, then one "lost" (or "closed") event when the seat is lost, and
// the end.
func (s *Server) lossStream(w http.ResponseWriter, r *http.Request, p *Principal) error {
	ref, err := parseSeatRef(r)
	if err != nil {
		return err
	}
	ctx, cancel := s.reqCtx(r)
	cl, sess, done, err := s.adopt(ctx, p, ref)
	cancel()
	if err != nil {
		return err
	}
	defer done()
	e := startSSE(w)
	if e.send("held", claimView(cl)) != nil {
		return nil
	}
	tick := time.NewTicker(pingInterval)
	defer tick.Stop()
	told := false // the last drain state sent: none before a drain
	for {
		on, drainMoved := cl.DrainState()
		if on != told {
			told = on
			event := "undrained"
			if on {
				event = "draining"
			}
			if e.send(event, claimView(cl)) != nil {
				return nil
			}
		}
		select {
		case <-drainMoved:
		case <-r.Context().Done():
			if errors.Is(context.Cause(r.Context()), ErrServerStopping) {
				_ = e.send("closed", LossView{Pool: ref.pool, Seat: ref.seat, Token: ref.token, Reason: ReasonServerClosed, Message: serverClosedMsg})
			}
			return nil
		case <-tick.C:
			if e.ping() != nil {
				return nil
			}
		case <-cl.Done():
			v := LossView{Pool: ref.pool, Seat: ref.seat, Token: ref.token, Reason: lossReason(cl.Err()), Message: cl.Err().Error()}
			event := "lost"
			switch {
			case errors.Is(cl.Err(), coordinator.ErrClosed) || errors.Is(sess.Err(), coordinator.ErrClosed):
				event, v.Reason, v.Message = "closed", ReasonServerClosed, serverClosedMsg
			case errors.Is(cl.Err(), coordinator.ErrLocalDeadline) && !s.leaseEnds(r.Context(), sess):
				event, v.Reason, v.Message = "closed", ReasonServerCutOff, "this server lost track of the seat's lease, which may live on, and the seat with it: reconnect to another server"
			}
			_ = e.send(event, v)
			return nil
		}
	}
}
