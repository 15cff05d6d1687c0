package command

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/audit"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"github.com/etcdpool/etcdpool/internal/metrics"
	"github.com/etcdpool/etcdpool/internal/roles"
)

// newLogger returns the slog logger that cfg asks for, writing to w.
func newLogger(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level)) // validated
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		opts.ReplaceAttr = durationString
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationString writes durations as Go duration strings ("1.5s"), which
// the JSON handler would otherwise write as integer nanoseconds.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
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

// process is what serve and sidecar open before they run: the validated
// configuration, the logger it asks for, an etcd client and the listener
// of the HTTP server.
type process struct {
	cfg config.Config
	log *slog.Logger
	cli *clientv3.Client
	ln  net.Listener
}

// openProcess loads and validates the configuration of mode, then opens
// the etcd client and listens on agent.listen or sidecar.listen. Close the
// process when done; the HTTP server closes the listener.
func openProcess(path string, mode config.Mode, s Streams, fs *pflag.FlagSet) (process, error) {
	cfg, err := loadConfig(path, mode, s, fs)
	if err != nil {
		return process{}, err
	}
	field, addr := "agent.listen", cfg.Agent.Listen
	if mode == config.ModeSidecar {
		field, addr = "sidecar.listen", cfg.Sidecar.Listen
	}
	log := newLogger(cfg.Log, s.Err)
	cli, err := agent.NewClient(cfg.Etcd)
	if err != nil {
		return process{}, err
	}
	if err := startupCheck(cli, cfg, mode, log); err != nil {
		cli.Close()
		return process{}, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		cli.Close()
		return process{}, fmt.Errorf("listen on %s %s: %w", field, addr, err)
	}
	return process{cfg: cfg, log: log, cli: cli, ln: ln}, nil
}

// close closes the etcd client.
func (p process) close() {
	p.cli.Close()
	p.log.Debug("etcd client closed")
}

// newCoordinator returns a coordinator on cli under cfg's prefix that logs
// to log and reports to m.
func newCoordinator(cli *clientv3.Client, cfg config.Config, log *slog.Logger, m *metrics.Metrics) (*coordinator.Coordinator, error) {
	co, err := coordinator.New(cli, coordinator.WithPrefix(cfg.Prefix), coordinator.WithLogger(log), coordinator.WithMetrics(m))
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	return co, nil
}

// agentOptions are the options of an agent or a sidecar: its logger, the
// bound on each etcd request, and m counting its failed keepalives and
// lost sessions.
func agentOptions(log *slog.Logger, timeout time.Duration, m *metrics.Metrics) []agent.Option {
	return []agent.Option{agent.WithLogger(log), agent.WithRequestTimeout(timeout),
		agent.WithKeepAliveFailureHook(m.KeepaliveFailure), agent.WithSessionLostHook(m.SessionLost)}
}

// serveHTTP serves h on ln until the returned function is called; that
// function stops the server and returns its error.
func serveHTTP(ln net.Listener, h http.Handler) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- agent.ServeHTTP(ctx, ln, h) }()
	return func() error {
		cancel()
		return <-served
	}
}

// agentRun is everything an agent needs to run, shared by serve and dev.
type agentRun struct {
	cli   *clientv3.Client
	cfg   config.Config
	log   *slog.Logger
	ln    net.Listener // for /metrics, /healthz, /readyz
	pools []string     // pools to report; nil: all
	// takeover takes over instances another agent holds; see
	// agent.WithTakeover.
	takeover bool
	// audit, if not nil, records the pools' events (--audit-log).
	audit *audit.Log
	// web is where the web view is served (--web-listen).
	web webConfig
}

// run serves HTTP, follows the event stream for the metrics and runs the
// agent until ctx ends and the drain is over. The HTTP server stays up
// during the drain, with /readyz failing.
func (r agentRun) run(ctx context.Context) error {
	reg, m := newRegistry()
	co, err := newCoordinator(r.cli, r.cfg, r.log, m)
	if err != nil {
		r.ln.Close()
		r.web.close()
		return err
	}
	defer func() {
		co.Close()
		r.log.Debug("coordinator closed")
	}()
	timeout := r.cfg.Etcd.DialTimeout.D()
	reg.MustRegister(metrics.NewPoolCollector(co, r.pools, timeout))
	a := agent.New(co, r.cfg.Agent, append(agentOptions(r.log, timeout, m), agent.WithTakeover(r.takeover))...)
	metrics.RegisterAgent(reg, agentState(a))

	stopAPI, err := startAPI(co, r.cfg, r.log)
	if err != nil {
		r.ln.Close()
		return err
	}
	defer func() { _ = stopAPI() }()
	bg, stop := context.WithCancel(context.Background())
	defer stop()
	followed := r.follow(bg, co, metrics.NewObserved(reg))
	audited := r.startAudit(bg, co)
	h, stopWeb := r.startWeb(bg, co, a.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	stopHTTP := serveHTTP(r.ln, h)

	err = a.Run(ctx)
	stop()
	<-followed
	<-audited
	if werr := stopWeb(); err == nil {
		err = werr
	}
	r.log.Debug("event stream stopped")
	if herr := stopHTTP(); err == nil {
		err = herr
	}
	r.log.Debug("http server stopped")
	return err
}

// agentState reads a's readiness for the agent gauges.
func agentState(a *agent.Agent) func() metrics.AgentState {
	return func() metrics.AgentState {
		st := a.Status()
		return metrics.AgentState{Ready: st.Registered && !st.Draining, LeaseAlive: st.LeaseAlive}
	}
}

// follow feeds the coordinator's event stream for r.pools into m until ctx
// ends; the returned channel closes when it has stopped.
func (r agentRun) follow(ctx context.Context, co *coordinator.Coordinator, m *metrics.Observed) <-chan struct{} {
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

// startupCheck waits up to etcd.dialTimeout for a connection and asks etcd
// whether this process may do what its mode needs (roles.Permissions),
// changing nothing. A TLS failure or a permanent refusal (permission
// denied, authentication failed) is returned: it does not pass by
// waiting, and the process exits 1 naming the operation and the key. An
// unreachable etcd is only logged: the process starts and keeps retrying.
func startupCheck(cli *clientv3.Client, cfg config.Config, mode config.Mode, log *slog.Logger) error {
	timeout := cfg.Etcd.DialTimeout.D()
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	if err := etcdclient.WaitReady(ctx, cli, cfg.Etcd.Client()); err != nil {
		if etcdclient.IsPermanent(err) {
			return fmt.Errorf("startup check: %w", err)
		}
		log.Warn("etcd unreachable at start; retrying", "err", err)
		return nil
	}
	err := etcdclient.CheckAccess(ctx, cli, startupAccess(cfg, mode))
	switch {
	case err == nil:
		return nil
	case etcdclient.IsPermanent(err):
		return fmt.Errorf("startup check: %w (see `poolctl roles` for what the %s needs)", err, actorOf(mode))
	}
	log.Warn("cannot check etcd permissions at start; retrying", "err", err)
	return nil
}

// startupAccess is what mode needs: the agent role for each pool of its
// instances (and write on the spec of each pool it creates), or the
// claimant role for the sidecar's pool.
func startupAccess(cfg config.Config, mode config.Mode) []etcdclient.Access {
	if mode == config.ModeSidecar {
		return roles.Permissions(cfg.Prefix, cfg.Sidecar.Pool, roles.Claimant)
	}
	var need []etcdclient.Access
	for _, p := range agentPools(cfg.Agent) {
		need = append(need, roles.Permissions(cfg.Prefix, p, roles.Agent)...)
	}
	for _, p := range cfg.Agent.Pools {
		need = append(need, etcdclient.Access{Write: true, Key: coordinator.SegPrefix(cfg.Prefix, p.Name, coordinator.SegSpec)})
	}
	return append(need, apiAccess(cfg)...)
}

func actorOf(mode config.Mode) roles.Actor {
	if mode == config.ModeSidecar {
		return roles.Claimant
	}
	return roles.Agent
}
