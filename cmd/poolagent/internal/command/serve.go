package command

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/internal/audit"
)

// ServeOptions are the inputs of `poolagent serve`.
type ServeOptions struct {
	// ConfigPath is the YAML file; default $ETCDPOOL_CONFIG.
	ConfigPath string
	// Takeover takes over, at start, the configured instances that another
	// agent's live lease holds (see agent.WithTakeover); default
	// $ETCDPOOL_TAKEOVER, else false.
	Takeover bool
	// AuditLog is the file the audit log is appended to, "-" for stdout;
	// empty: no audit log.
	AuditLog string
	// WebListen is where the read-only web view is served: host:port, ""
	// for agent.listen (under /ui/), or "off" (the default).
	WebListen string
	streams   Streams
	flags     *pflag.FlagSet
}

// NewServeCommand returns `poolagent serve`.
func NewServeCommand(s Streams) *cobra.Command {
	o := &ServeOptions{streams: s}
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Register this host's instances and keep them registered",
		Long: `serve registers the instances listed in the config file under one lease and keeps
them registered: after a lost lease it registers them under a new one, and an
instance deleted by someone else while the lease lives is registered again. On
SIGTERM (or SIGINT, or a SIGHUP not ignored at start) it marks them draining, waits up to the drain timeout for held seats to
be released, then deregisters them and exits 0. It serves /metrics, /healthz
and /readyz.

It writes only instance keys bound to its own lease. An instance that another
agent's live lease holds is left alone, and /readyz names it, until it is free;
with --takeover it is taken over at start instead, in one transaction that
keeps the claims bound to it, and the other agent then leaves it alone (its
drain neither marks nor deletes it). An instance that an earlier run of an
agent with the same --name holds (a restart) is always taken over.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	o.flags = cmd.Flags()
	o.flags.StringVar(&o.ConfigPath, "config", "", "YAML config file (env "+config.EnvName("config")+")")
	o.flags.StringVar(&o.AuditLog, "audit-log", "", "append every claim, release, force-release, expiry, drain and spec change as JSON lines to FILE (- for stdout); resumes after a restart")
	webFlag(o.flags, &o.WebListen, webOff)
	o.flags.BoolVar(&o.Takeover, "takeover", false, "take over instances another agent holds, keeping their claims (env "+config.EnvName("takeover")+")")
	config.BindFlags(o.flags, config.ModeServe)
	return cmd
}

// Run loads and validates the configuration, then runs the agent until
// ctx ends and its instances are drained.
func (o *ServeOptions) Run(ctx context.Context) error {
	takeover, err := o.takeover()
	if err != nil {
		return err
	}
	p, err := openProcess(o.ConfigPath, config.ModeServe, o.streams, o.flags)
	if err != nil {
		return err
	}
	defer p.close()
	var auditLog *audit.Log
	if o.AuditLog != "" {
		if auditLog, err = audit.Open(o.AuditLog, o.streams.Out); err != nil {
			p.ln.Close()
			return err
		}
		defer auditLog.Close()
	}
	web, err := listenWeb(o.WebListen)
	if err != nil {
		p.ln.Close()
		return err
	}
	p.log.Info("agent starting", "endpoints", p.cfg.Etcd.Endpoints, "listen", p.ln.Addr().String(),
		"instances", len(p.cfg.Agent.Instances), "takeover", takeover)
	return agentRun{cli: p.cli, cfg: p.cfg, log: p.log, ln: p.ln, pools: agentPools(p.cfg.Agent), takeover: takeover, audit: auditLog, web: web}.run(ctx)
}

// takeover returns --takeover if set, else $ETCDPOOL_TAKEOVER, else false.
func (o *ServeOptions) takeover() (bool, error) {
	if f := o.flags.Lookup("takeover"); f != nil && f.Changed {
		return o.Takeover, nil
	}
	name := config.EnvName("takeover")
	v, ok := o.streams.LookupEnv(name)
	if !ok || v == "" {
		return o.Takeover, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, &config.FieldError{Field: name, Msg: "want true or false, got " + strconv.Quote(v)}
	}
	return on, nil
}
