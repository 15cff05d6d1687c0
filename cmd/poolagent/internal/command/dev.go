package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/internal/embedetcd"
)

// DevOptions are the inputs of `poolagent dev`. Zero values are not
// defaults; NewDevCommand's flags set them.
type DevOptions struct {
	// DataDir keeps etcd's data across runs. Default ./etcdpool-data.
	DataDir string
	// ClientAddr is where etcd serves clients. Default 127.0.0.1:2379.
	ClientAddr string
	// PeerAddr is etcd's peer address. Default 127.0.0.1:2380.
	PeerAddr string
	// Listen is host:port of /metrics, /healthz, /readyz. Default 127.0.0.1:9464.
	Listen string
	// APIListen is host:port of the HTTP API, served without credentials;
	// "" turns it off. Default config.DefaultDevAPIListen (127.0.0.1:8480).
	APIListen string
	// ConfigPath, when set, takes agent.pools and agent.instances from a
	// config file instead of the demo flags below.
	ConfigPath string
	// Pool is the demo pool's name. Default "demo".
	Pool string
	// Capacity is the demo pool's capacity. Default 4.
	Capacity int
	// Instances is how many demo instances to register. Default 2.
	Instances int
	// Seats is how many seats each demo instance serves. Default 2.
	Seats int
	// TTL is the agent's lease TTL. Default 10s.
	TTL time.Duration
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// WebListen is where the read-only web view is served: host:port, ""
	// (the default) for Listen, under /ui/, or "off".
	WebListen string

	streams Streams
	flags   *pflag.FlagSet
	webURL  string // where the web view is, for the banner; "" if off
}

// NewDevCommand returns `poolagent dev`.
func NewDevCommand(s Streams) *cobra.Command {
	o := &DevOptions{streams: s}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run an embedded etcd with a demo pool: etcdpool with no setup",
		Long: `dev starts a single-node etcd inside this process, creates a demo pool (unless it
exists), registers demo instances, serves metrics and prints how to point poolctl
at it. Ctrl-C stops everything; etcd's data stays in the data dir.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.DataDir, "data-dir", "./etcdpool-data", "etcd data directory, kept across runs")
	fs.StringVar(&o.ClientAddr, "listen-client", "127.0.0.1:2379", "host:port where etcd serves clients")
	fs.StringVar(&o.PeerAddr, "listen-peer", "127.0.0.1:2380", "host:port of etcd's peer listener")
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:9464", "host:port of /metrics, /healthz, /readyz")
	fs.StringVar(&o.APIListen, "api-listen", config.DefaultDevAPIListen, "host:port of the HTTP API, open to anyone who can connect (loopback only); \"\" turns it off")
	fs.StringVar(&o.ConfigPath, "config", "", "config file whose agent.pools and agent.instances replace the demo")
	fs.StringVar(&o.Pool, "pool", "demo", "demo pool name")
	fs.IntVar(&o.Capacity, "capacity", 4, "demo pool capacity")
	fs.IntVar(&o.Instances, "instances", 2, "demo instances to register")
	fs.IntVar(&o.Seats, "seats", 2, "seats per demo instance")
	fs.DurationVar(&o.TTL, "ttl", 10*time.Second, "lease TTL of the demo instances")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info, warn or error")
	webFlag(fs, &o.WebListen, webShared)
	o.flags = fs
	return cmd
}

// Config returns the agent configuration dev runs: the demo pool and
// instances, or those of the config file.
func (o *DevOptions) Config() (config.Config, error) {
	cfg := config.Default()
	if o.ConfigPath != "" {
		var err error
		if cfg, err = config.Load(o.ConfigPath, config.ModeServe, noEnv, pflag.NewFlagSet("", pflag.ContinueOnError)); err != nil {
			return cfg, err
		}
	} else {
		cfg.Agent.Pools = []config.Pool{{Name: o.Pool, Capacity: o.Capacity}}
		cfg.SetOrigin("agent.pools[0]", o.poolFlags())
		cfg.SetOrigin("agent.pools[0].name", "--pool")
		cfg.SetOrigin("agent.instances", "--instances")
		for i := range o.Instances {
			cfg.Agent.Instances = append(cfg.Agent.Instances, config.Instance{
				Pool: o.Pool, ID: fmt.Sprintf("%s-%d", o.Pool, i), Address: fmt.Sprintf("127.0.0.1:%d", 9000+i),
				Labels: map[string]string{"slot": fmt.Sprint(i % 2)}, Seats: o.Seats,
			})
			for _, f := range []string{"pool", "id"} {
				cfg.SetOrigin(fmt.Sprintf("agent.instances[%d].%s", i, f), "--pool")
			}
			cfg.SetOrigin(fmt.Sprintf("agent.instances[%d].seats", i), "--seats")
		}
	}
	cfg.Etcd.Endpoints = []string{"http://" + o.ClientAddr}
	cfg.Agent.Listen, cfg.Agent.TTL, cfg.Agent.DrainTimeout = o.Listen, config.Duration(o.TTL), 0
	cfg.Log.Level = o.LogLevel
	for field, flag := range map[string]string{"agent.listen": "--listen", "agent.ttl": "--ttl", "log.level": "--log-level"} {
		cfg.SetOrigin(field, flag)
	}
	if cfg.API.Listen == "" || o.flags.Changed("api-listen") {
		cfg.API.Listen = o.APIListen // a config file may set its own api section
		cfg.SetOrigin("api.listen", "--api-listen")
	}
	return cfg, cfg.ValidateServe()
}

// poolFlags names the flags the demo pool came from, for its errors:
// the one the user set, or both.
func (o *DevOptions) poolFlags() string {
	switch pool, capacity := o.flags.Changed("pool"), o.flags.Changed("capacity"); {
	case capacity && !pool:
		return "--capacity"
	case pool && !capacity:
		return "--pool"
	}
	return "--pool/--capacity"
}

func noEnv(string) (string, bool) { return "", false }

// Run starts etcd and the agent, and stops both when ctx ends.
func (o *DevOptions) Run(ctx context.Context) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, o.streams.Err)
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen on --listen %s: %w", o.Listen, err)
	}
	srv, err := embedetcd.Start(embedetcd.Config{Dir: o.DataDir, ClientAddr: o.ClientAddr, PeerAddr: o.PeerAddr})
	if errors.Is(err, embedetcd.ErrAddrInUse) {
		ln.Close()
		return fmt.Errorf("%w; choose free ports with --listen-client and --listen-peer", err)
	}
	if errors.Is(err, embedetcd.ErrDirInUse) {
		ln.Close()
		return fmt.Errorf("%w; stop the other one or choose another --data-dir", err)
	}
	if err != nil {
		ln.Close()
		return err
	}
	defer srv.Close()
	cli, err := agent.NewClient(cfg.Etcd)
	if err != nil {
		ln.Close()
		return err
	}
	defer cli.Close()
	web, err := listenWeb(o.WebListen)
	if err != nil {
		ln.Close()
		return err
	}
	o.webURL = webURL(web, ln.Addr().String())
	o.banner(o.streams.Out, cfg, srv.ClientURL(), ln.Addr().String())
	err = agentRun{cli: cli, cfg: cfg, log: log, ln: ln, web: web}.run(ctx)
	log.Info("stopping etcd; data kept", "dir", o.DataDir)
	return err
}

func (o *DevOptions) banner(w io.Writer, cfg config.Config, etcdURL, listen string) {
	fmt.Fprintf(w, "etcdpool dev is running.\n  etcd:     %s (data in %s)\n", etcdURL, o.DataDir)
	for _, p := range cfg.Agent.Pools {
		fmt.Fprintf(w, "  pool:     %s (capacity %d, created unless it existed)\n", p.Name, p.Capacity)
	}
	for _, in := range cfg.Agent.Instances {
		fmt.Fprintf(w, "  instance: %s/%s at %s, %d seat(s)\n", in.Pool, in.ID, in.Address, max(in.Seats, 1))
	}
	fmt.Fprintf(w, "  metrics:  http://%s/metrics\n", listen)
	if o.webURL != "" {
		fmt.Fprintf(w, "  web view: %s\n", o.webURL)
	}
	if cfg.API.Listen != "" {
		fmt.Fprintf(w, "  http api: http://%s/v1/ (no credentials; OpenAPI at /v1/openapi.json)\n", cfg.API.Listen)
	}
	fmt.Fprintf(w, "\nTry:\n")
	fmt.Fprintf(w, "  poolctl --endpoints %s status\n", etcdURL)
	if len(cfg.Agent.Instances) > 0 {
		fmt.Fprintf(w, "  poolagent sidecar --endpoints %s --pool %s --listen 127.0.0.1:8086 --seat-file ./seat.json\n",
			etcdURL, cfg.Agent.Instances[0].Pool)
	}
	fmt.Fprintf(w, "\nPress Ctrl-C to stop; etcd's data stays in %s.\n", o.DataDir)
}
