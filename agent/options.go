package agent

import (
	"log/slog"
	"time"
)

// Option configures an Agent or a Sidecar.
type Option func(*options)

type options struct {
	log                *slog.Logger  // default: discard
	requestTimeout     time.Duration // default 2s
	pollInterval       time.Duration // default 200ms
	onSessionLost      func()        // default: none
	onKeepAliveFailure func(error)   // default: none
	takeover           bool          // default false
	ownerInterval      time.Duration // default 5s
}

func buildOptions(opts []Option) options {
	o := options{
		log:                slog.New(slog.DiscardHandler),
		requestTimeout:     2 * time.Second,
		pollInterval:       200 * time.Millisecond,
		onSessionLost:      func() {},
		onKeepAliveFailure: func(error) {},
		ownerInterval:      5 * time.Second,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRequestTimeout bounds each etcd request the agent or sidecar makes on
// its own (grant, register, release, health checks). Default 2s.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) { o.requestTimeout = d }
}

// WithPollInterval sets how often a draining agent checks for held seats.
// Default 200ms.
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.pollInterval = d } }

// WithSessionLostHook sets f, called each time a session is lost before it
// was closed: the lease expired, was revoked, or could not be kept alive
// until its local deadline. The agent and the sidecar then open a new
// session, unless the sidecar held a seat. Default: none.
func WithSessionLostHook(f func()) Option { return func(o *options) { o.onSessionLost = f } }

// WithKeepAliveFailureHook sets f, called after each keepalive attempt of
// any of the agent's or sidecar's sessions that fails (see
// coordinator.WithKeepAliveFailure): a session that dies of an etcd outage
// usually counts one or more failures first. f must not block. Default:
// none.
func WithKeepAliveFailureHook(f func(error)) Option {
	return func(o *options) { o.onKeepAliveFailure = f }
}

// WithTakeover makes the agent take over, in one transaction that compares
// the other lease, each configured instance that the live lease of an
// agent started before this one holds (owner.go: by the epoch each
// registration records). The other agent's writes to it then fail, and
// claims bound to it keep their seats. Use it where two agents overlap on
// purpose, as a Deployment's rolling update does: the newer keeps the
// instance, and takes it back should the older register it again while
// the newer's lease was lost. Without it the agent waits until the
// instance is free, and its /readyz says which agent holds it. Either way
// an instance a newer agent took from this process is taken back only
// when that agent stops (it drains the instance to stop). Default false.
func WithTakeover(on bool) Option { return func(o *options) { o.takeover = on } }

// WithOwnerCheckInterval sets how often the agent reads its instances to
// find those another agent took over (its /readyz then fails) and those
// that another agent left. Deletions are seen at once through a watch.
// Default 5s; a d <= 0 keeps the default.
func WithOwnerCheckInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.ownerInterval = d
		}
	}
}
