package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// HTTP paths served by the agent and the sidecar.
const (
	// HealthzPath answers 200 while the process is healthy (liveness).
	HealthzPath = "/healthz"
	// ReadyzPath answers 200 while the process is ready (readiness).
	ReadyzPath = "/readyz"
	// StartupzPath answers 200 once the sidecar holds its seat (startup).
	StartupzPath = "/startupz"
	// SeatPath serves the sidecar's claim as JSON.
	SeatPath = "/seat"
	// MetricsPath serves Prometheus metrics.
	MetricsPath = "/metrics"
)

// Check is one named health condition; Run returns nil when it holds.
type Check struct {
	// Name labels the check in a failure report.
	Name string
	// Run returns nil when the condition holds; ctx bounds it.
	Run func(ctx context.Context) error
}

// Probe returns a handler that runs checks, each bounded by timeout, and
// answers 200 "ok" when all pass, or 503 with one line per failure.
func Probe(timeout time.Duration, checks ...Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		var failed []string
		for _, c := range checks {
			if err := c.Run(ctx); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", c.Name, err))
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.Join(failed, "\n"))
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

// ServeHTTP serves h on ln until ctx ends, then shuts the server down,
// giving requests in flight up to a second.
func ServeHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	// An idle keep-alive connection is closed after IdleTimeout, so that
	// idle clients cannot hold the server's sockets for good.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("agent: http server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// Handler serves the agent's /healthz (etcd reachable and lease alive),
// /readyz (every instance registered under the agent's lease, none held
// by another agent, not draining) and, when metrics is not nil, /metrics.
func (a *Agent) Handler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(HealthzPath, Probe(a.o.requestTimeout, Check{"etcd", a.checkEtcd}, Check{"lease", a.checkLease}))
	mux.Handle(ReadyzPath, Probe(a.o.requestTimeout, Check{"registered", a.checkRegistered}))
	if metrics != nil {
		mux.Handle(MetricsPath, metrics)
	}
	return mux
}

func (a *Agent) checkEtcd(ctx context.Context) error {
	_, err := a.co.Client().Get(ctx, coordinator.HealthzKey(a.co.Prefix()))
	return err
}

func (a *Agent) checkLease(context.Context) error {
	st := a.Status()
	if !st.LeaseAlive {
		return errors.New("no live lease")
	}
	return nil
}

func (a *Agent) checkRegistered(context.Context) error {
	st := a.Status()
	switch {
	case st.Draining:
		return errors.New("draining")
	case len(st.Foreign) > 0:
		return fmt.Errorf("not the owner of %s", strings.Join(st.Foreign, "; "))
	case !st.Registered:
		return errors.New("instances not registered")
	}
	return nil
}
