package command

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/metrics"
)

// newLogger returns the slog logger that cfg asks for, writing to w.
func newLogger(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level)) // validated
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// loadConfig merges file, environment and flags for mode and validates.
func loadConfig(path string, mode config.Mode, s Streams, fs *pflag.FlagSet) (config.Config, error) {
	if path == "" {
		path, _ = s.LookupEnv(config.EnvName("config"))
	}
	cfg, err := config.Load(path, mode, s.LookupEnv, fs)
	if err != nil {
		return cfg, err
	}
	if mode == config.ModeServe {
		return cfg, cfg.ValidateServe()
	}
	return cfg, cfg.ValidateSidecar()
}

// newRegistry returns a registry with the etcdpool families and the Go
// and process collectors.
func newRegistry() (*prometheus.Registry, *metrics.Metrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg, metrics.New(reg)
}

// agentRun is everything an agent needs to run, shared by serve and dev.
type agentRun struct {
	cli   *clientv3.Client
	cfg   config.Config
	log   *slog.Logger
	ln    net.Listener // for /metrics, /healthz, /readyz
	pools []string     // pools to report; nil: all
}

// run serves HTTP, follows the event stream for the metrics and runs the
// agent until ctx ends and the drain is over. The HTTP server stays up
// during the drain, with /readyz failing.
func (r agentRun) run(ctx context.Context) error {
	reg, m := newRegistry()
	co, err := coordinator.New(r.cli, coordinator.WithPrefix(r.cfg.Prefix), coordinator.WithLogger(r.log), coordinator.WithMetrics(m))
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	defer func() {
		co.Close()
		r.log.Debug("coordinator closed")
	}()
	timeout := r.cfg.Etcd.DialTimeout.D()
	reg.MustRegister(metrics.NewPoolCollector(co, r.pools, timeout))
	a := agent.New(co, r.cfg.Agent, agent.WithLogger(r.log), agent.WithRequestTimeout(timeout), agent.WithLeaseLostHook(m.KeepaliveFailure))

	bg, stop := context.WithCancel(context.Background())
	defer stop()
	followed := r.follow(bg, co, m)
	served := make(chan error, 1)
	go func() {
		served <- agent.ServeHTTP(bg, r.ln, a.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	}()

	err = a.Run(ctx)
	stop()
	<-followed
	r.log.Debug("event stream stopped")
	if herr := <-served; err == nil {
		err = herr
	}
	r.log.Debug("http server stopped")
	return err
}

// follow feeds the coordinator's event stream for r.pools into m until ctx
// ends; the returned channel closes when it has stopped.
func (r agentRun) follow(ctx context.Context, co *coordinator.Coordinator, m *metrics.Metrics) <-chan struct{} {
	watch, include := "", func(string) bool { return true }
	if len(r.pools) == 1 {
		watch = r.pools[0]
	}
	if len(r.pools) > 0 {
		set := map[string]bool{}
		for _, p := range r.pools {
			set[p] = true
		}
		include = func(p string) bool { return set[p] }
	}
	done := make(chan struct{})
	events := co.Watch(ctx, watch)
	go func() {
		defer close(done)
		m.Follow(events, include)
	}()
	return done
}

// agentPools lists the pools an agent's metrics report: those it creates
// and those its instances serve.
func agentPools(a config.Agent) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range a.Pools {
		add(p.Name)
	}
	for _, in := range a.Instances {
		add(in.Pool)
	}
	return out
}
