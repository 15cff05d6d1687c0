package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
)

// defaultKillGrace is how long run waits after SIGTERM before SIGKILL
// (lossGrace cuts it on a lost seat).
const defaultKillGrace = 10 * time.Second

// runOptions is run.
type runOptions struct {
	g         *globalOptions
	Pool      string
	Tenant    string
	Instance  string
	Labels    []string
	Holder    string
	Wait      time.Duration // 0: wait as long as it takes
	NoWait    bool
	TTL       time.Duration // 0: the pool spec's seat TTL
	KillGrace time.Duration
	// DrainSignal is sent to the command when its seat's instance starts
	// draining; "" sends none.
	DrainSignal string
	Verbose     bool
	Argv        []string

	labels    map[string]string
	path      string        // Argv[0] resolved in PATH
	drainSig  os.Signal     // DrainSignal parsed; nil for none
	deadlines *deadlineFeed // the session's deadline, for the guard
}

func newRunCommand(g *globalOptions) *cobra.Command {
	o := &runOptions{g: g}
	cmd := &cobra.Command{
		Use:   "run POOL [flags] -- CMD [ARGS...]",
		Short: "Run a command while holding a seat of a pool",
		Long:  runLong,
		Example: "  poolctl run gpu -- ./train.sh --epochs 3\n" +
			"  poolctl run builds --tenant ci --wait 10m -- make test\n" +
			"  poolctl run gpu --label zone=a --no-wait -- sh -c 'echo seat $ETCDPOOL_SEAT on $ETCDPOOL_INSTANCE_ADDR'",
		Args:              cobra.ArbitraryArgs,
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	f := cmd.Flags()
	f.StringVar(&o.Tenant, "tenant", "", "charge the seat to this tenant (subject to tenant limits)")
	f.StringVar(&o.Instance, "instance", "", "bind the seat to this instance")
	f.StringArrayVar(&o.Labels, "label", nil, "bind the seat to an instance with label k=v; repeatable, or k=v,k2=v2 (alias --labels)")
	f.StringVar(&o.Holder, "holder", "", "holder name shown to operators (default <hostname>/<pid>)")
	f.DurationVar(&o.Wait, "wait", 0, "give up (exit 6) if no seat is granted within this long; 0 waits as long as it takes (alias --wait-timeout)")
	f.BoolVar(&o.NoWait, "no-wait", false, "give up at once (exit 6) if no seat is free now")
	f.DurationVar(&o.TTL, "ttl", 0, "session lease TTL, whole seconds (default: the pool's seat TTL)")
	f.DurationVar(&o.KillGrace, "kill-grace", defaultKillGrace, "after SIGTERM, wait this long before SIGKILL (a seat whose lease ended, or that etcd could no longer be asked about, gets less: see above)")
	f.StringVar(&o.DrainSignal, "drain-signal", "", "send this signal (e.g. USR1, TERM) to the command when its instance starts draining; default none")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "report waiting, the seat taken and its release on stderr")
	f.SetNormalizeFunc(sidecarFlagNames)
	return cmd
}

// sidecarFlagNames lets run take the names `poolagent sidecar` uses for
// the same settings: --wait-timeout is --wait, and --labels k=v,k2=v2 is
// --label with a comma-separated list.
func sidecarFlagNames(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	switch name {
	case "wait-timeout":
		return "wait"
	case "labels":
		return "label"
	}
	return pflag.NormalizedName(name)
}

const runLong = `Run a command while holding one seat of POOL, like "consul lock -n".

poolctl waits for a seat (queueing in FIFO order; --wait bounds the wait,
--no-wait refuses to wait), then starts CMD in its own process group with
these variables added to its environment:

  ETCDPOOL_POOL           the pool
  ETCDPOOL_SEAT           the seat number
  ETCDPOOL_TOKEN          the fencing token; pass it to services that must reject stale holders
  ETCDPOOL_INSTANCE       the instance the seat is bound to, or empty
  ETCDPOOL_INSTANCE_ADDR  that instance's address, or empty
  ETCDPOOL_DRAIN_FILE     a path that exists while that instance is draining, or empty

ETCDPOOL_PASSWORD is removed from the command's environment. SIGINT, SIGTERM
and SIGHUP are forwarded to the command's whole process group. The command
runs in its own process group, so it cannot read from the terminal.

When CMD exits, any process it left behind is stopped (SIGTERM, then
SIGKILL after --kill-grace), the seat is released and poolctl exits with
CMD's exit code (128+N if a signal N killed it).

When the seat's instance starts draining, $ETCDPOOL_DRAIN_FILE is created
(and removed if it is undrained) and --drain-signal, if given, is sent to
the command's process group; the command keeps its seat either way.

On Linux, CMD and everything it starts die with poolctl, however poolctl
dies (even SIGKILL): a guard process, using a cgroup of its own where
cgroup v2 is writable, kills the whole tree when poolctl is gone. It also
stops CMD when poolctl is stopped (SIGSTOP) or hung past the session's
local deadline, as poolctl would have: SIGTERM then, SIGKILL half the
session's margin later (or after --kill-grace if shorter).

If the seat is lost while CMD runs (force-released, session lease lost,
instance gone, pool deleted), poolctl sends SIGTERM to everything CMD
started, SIGKILL after a grace, and exits 7. The grace is --kill-grace
after an operator's force-release or the pool's deletion, and after the
instance's loss, whose seat stays held until CMD is gone; otherwise CMD
is gone before the seat can be granted to anyone else: cut off from etcd
until the session's local deadline, it gets half the session's margin
(which the lease outlives the deadline by), or --kill-grace if shorter;
after the lease's end on the server, none. The same holds for what CMD
left running when it exited, if the seat goes during --kill-grace. A
seat lost before CMD starts is never run on. The session lease is
revoked at the end in every case.

While CMD runs, poolctl is not suspended by Ctrl-Z (SIGTSTP: it says so
instead), nor stopped by reading or writing the terminal from the
background: stopped, it could not keep the seat while CMD ran on.

A command that is not found exits 127, one that cannot be executed 126, as
in a shell, before any seat is claimed.`

// Complete implements command.
func (o *runOptions) Complete(cmd *cobra.Command, args []string) error {
	dash := cmd.ArgsLenAtDash()
	if dash < 0 {
		return usageError("separate the command with --: poolctl run POOL [flags] -- CMD [ARGS...]")
	}
	if dash != 1 || len(args) == dash {
		return usageError("want exactly POOL before -- and a command after it: poolctl run POOL [flags] -- CMD [ARGS...]")
	}
	o.Pool, o.Argv = args[0], args[dash:]
	labels, err := parseLabels(o.Labels)
	if err != nil {
		return err
	}
	o.labels = labels
	if err := o.completeDrainSignal(); err != nil {
		return err
	}
	path, err := lookCommand(o.Argv[0])
	if err != nil {
		return err
	}
	o.path = path
	return nil
}

// parseLabels reads --label values: k=v each, or k=v,k2=v2; repeats add
// up. Shared by run and explain.
func parseLabels(lists []string) (map[string]string, error) {
	out := map[string]string{}
	for _, list := range lists {
		for _, kv := range strings.Split(list, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usageError("--label %q: want key=value", kv)
			}
			out[k] = v
		}
	}
	return out, nil
}

// Validate implements command.
func (o *runOptions) Validate() error {
	if err := checkClaimNames(o.Pool, o.Tenant, o.Instance); err != nil {
		return err
	}
	switch {
	case o.Wait < 0:
		return usageError("--wait %v: must be 0 (as long as it takes) or positive", o.Wait)
	case o.NoWait && o.Wait > 0:
		return usageError("--wait and --no-wait contradict each other")
	case o.TTL != 0 && (o.TTL%time.Second != 0 || o.TTL < coordinator.MinTTL || o.TTL > coordinator.MaxTTL):
		return usageError("--ttl %v: must be whole seconds in %v..%v", o.TTL, coordinator.MinTTL, coordinator.MaxTTL)
	case o.KillGrace <= 0:
		return usageError("--kill-grace %v: must be positive", o.KillGrace)
	}
	return checkText("--holder", o.Holder, coordinator.MaxHolderLen)
}

// Run implements command.
func (o *runOptions) Run(ctx context.Context) error {
	// A seat whose instance went stays held until the command is gone and
	// the session closed (hold, lossGrace): nobody can bind the instance
	// again while the command may still use it.
	c, done, err := o.g.connect(ctx, coordinator.WithInstanceGoneHold(-1))
	if err != nil {
		return err
	}
	defer done()
	sess, err := o.openSession(ctx, c)
	if err != nil {
		return err
	}
	defer o.closeSession(sess)
	cl, err := o.claim(ctx, c, sess)
	if err != nil {
		return err
	}
	return o.hold(ctx, cl, sess, o.instanceOf(ctx, c, cl))
}

// instanceOf returns the instance the seat is bound to. A claim adopted
// after an ambiguous transaction knows only the instance's ID; then the
// address is read from etcd (best effort: it stays empty on error).
func (o *runOptions) instanceOf(ctx context.Context, c *coordinator.Coordinator, cl *coordinator.Claim) coordinator.Instance {
	in, ok := cl.Instance()
	if !ok || in.Addr != "" {
		return in
	}
	ctx, cancel := o.g.withTimeout(ctx)
	defer cancel()
	go func() { // no read past the seat's loss: hold then says so at once
		select {
		case <-cl.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	all, _ := c.Instances(ctx, cl.Pool())
	for _, x := range all {
		if x.ID == in.ID {
			return x
		}
	}
	return in
}

// openSession reads the pool (for its seat TTL) and grants the lease.
func (o *runOptions) openSession(ctx context.Context, c *coordinator.Coordinator) (*coordinator.Session, error) {
	ctx, cancel := o.g.withTimeout(ctx)
	defer cancel()
	ttl := o.TTL
	if ttl == 0 {
		p, err := c.GetPool(ctx, o.Pool)
		if err != nil {
			return nil, timeoutErr(ctx, err)
		}
		ttl = p.Spec.SeatTTL()
	}
	s, err := o.newSession(ctx, c.Client(), ttl)
	return s, timeoutErr(ctx, err)
}

// newSession grants run's session: its deadline is followed for the
// command's guard (run_deadline.go), which hold needs.
func (o *runOptions) newSession(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (*coordinator.Session, error) {
	o.deadlines = newDeadlineFeed()
	return coordinator.NewSession(ctx, cli, coordinator.WithTTL(ttl), coordinator.WithDeadlineMoved(o.deadlines.set))
}

// closeSession revokes the lease, deleting anything still bound to it.
func (o *runOptions) closeSession(s *coordinator.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), o.g.CommandTimeout)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		o.logf("warning: %s; the lease expires in %v", Message(err), s.TTL())
	}
}

// logf writes one line to stderr when --verbose is set, and always for
// warnings.
func (o *runOptions) logf(format string, args ...any) {
	if o.Verbose || strings.HasPrefix(format, "warning:") {
		fmt.Fprintln(o.g.env.ErrOut, "poolctl: "+escape(fmt.Sprintf(format, args...)))
	}
}
