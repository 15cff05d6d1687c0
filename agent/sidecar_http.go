package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Handler serves the sidecar's /startupz and /readyz (200 only while the
// seat is held), /healthz (200 unless the seat was lost or never
// obtained), /seat (the claim as JSON) and, when metrics is not nil,
// /metrics.
func (s *Sidecar) Handler(metrics http.Handler) http.Handler {
	held := Check{"seat", func(context.Context) error {
		if rec := s.Record(); rec.State != StateHeld {
			return fmt.Errorf("seat %s", rec.State)
		}
		return nil
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
		_ = enc.Encode(s.Record())
	})
	if metrics != nil {
		mux.Handle(MetricsPath, metrics)
	}
	return mux
}
