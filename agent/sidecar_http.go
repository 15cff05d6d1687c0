package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Handler serves the sidecar's /startupz and /readyz (200 only while the
// seat is held; while it waits, the 503 says why), /healthz (200 unless
// the seat was lost or never obtained), /seat (the claim as JSON, with why
// it waits while it does) and, when metrics is not nil, /metrics.
func (s *Sidecar) Handler(metrics http.Handler) http.Handler {
	held := Check{"seat", func(context.Context) error {
		rec := s.Record()
		switch {
		case rec.State == StateHeld:
			return s.leaseAtRisk()
		case rec.State == StateFailed:
			return fmt.Errorf("seat %s: %s", rec.State, rec.Error)
		}
		if st, ok := s.WaitStatus(); ok && rec.State == StateWaiting {
			return fmt.Errorf("seat %s: %s", rec.State, st)
		}
		return fmt.Errorf("seat %s", rec.State)
	}}
	alive := Check{"seat", func(context.Context) error {
		if rec := s.Record(); rec.State == StateLost || rec.State == StateFailed {
			return fmt.Errorf("seat %s: %s", rec.State, rec.Error)
		}
		return nil
	}}
	mux := http.NewServeMux()
	mux.Handle(StartupzPath, Probe(s.o.requestTimeout, held))
	mux.Handle(ReadyzPath, Probe(s.o.requestTimeout, held))
	mux.Handle(HealthzPath, Probe(s.o.requestTimeout, alive))
	mux.HandleFunc(SeatPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		v := seatView{SeatRecord: s.Record()}
		if st, ok := s.WaitStatus(); ok && v.State == StateWaiting {
			v.Waiting = &st
		}
		_ = enc.Encode(v)
	})
	if metrics != nil {
		mux.Handle(MetricsPath, metrics)
	}
	return mux
}
