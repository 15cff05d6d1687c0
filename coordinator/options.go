package coordinator

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// DefaultPrefix is the root under which all keys live.
const DefaultPrefix = "/etcdpool"

// Option configures a Coordinator.
type Option func(*options)

type options struct {
	prefix  string        // default DefaultPrefix
	logger  *slog.Logger  // default: discards
	metrics Metrics       // default: NoopMetrics
	timeout time.Duration // bound on background cleanup writes; default 5s
	// goneHold is how long a claim whose instance went keeps its seat
	// after Done closes (holder.go); 0: the session's TTL; < 0: until
	// Release or the session's end.
	goneHold time.Duration
}

func defaultOptions() options {
	return options{
		prefix:  DefaultPrefix,
		logger:  slog.New(slog.DiscardHandler),
		metrics: NoopMetrics{},
		timeout: 5 * time.Second,
	}
}

// WithPrefix sets the root prefix, for example "/etcdpool". It must start
// with '/' and not end with one.
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMetrics sets the metrics sink. Default: NoopMetrics.
func WithMetrics(m Metrics) Option { return func(o *options) { o.metrics = m } }

// WithCleanupTimeout bounds writes made after the caller's ctx is done, such
// as removing a cancelled waiter's queue key. Default 5s.
func WithCleanupTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithInstanceGoneHold sets how long a claim whose bound instance went
// away keeps its seat, and the instance slot with it, after its Done has
// closed with ErrInstanceGone, unless its holder releases it first. While
// the slot is held, an instance registered again under the same ID (its
// agent cut off from etcd past its lease, then back) cannot be bound by
// another claim, so a holder that stops using the worker within this of
// Done closing never shares it. Default (0): the claim's session TTL, as
// long as etcd keeps the seat of a holder that died. Negative: until the
// holder releases the seat or its session ends; for holders that always
// release, or close their session, once their work has stopped.
func WithInstanceGoneHold(d time.Duration) Option { return func(o *options) { o.goneHold = d } }

// ValidatePrefix checks a root prefix: it must start with '/', not end with
// one, and be at most 256 bytes. Errors wrap ErrInvalid.
func ValidatePrefix(p string) error {
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || len(p) > 256 {
		return fmt.Errorf("%w: prefix %q must start with '/', not end with '/', and be at most 256 bytes", ErrInvalid, p)
	}
	return nil
}

func (o options) validate() error {
	if err := ValidatePrefix(o.prefix); err != nil {
		return err
	}
	if o.logger == nil || o.metrics == nil {
		return fmt.Errorf("%w: logger and metrics must not be nil", ErrInvalid)
	}
	if o.timeout <= 0 {
		return fmt.Errorf("%w: cleanup timeout must be positive", ErrInvalid)
	}
	return nil
}

// ClaimOption configures one claim.
type ClaimOption func(*claimOptions)

type claimOptions struct {
	holder   string            // default: "<hostname>/<pid>"
	tenant   string            // default: none
	instance string            // default: any
	labels   map[string]string // default: any
	wait     bool              // default: fail with ErrNoSeat
	onWait   func(WaitStatus)  // default: none; see WithWaitStatus
}

// WithHolder names the claimant, shown to operators. Default
// "<hostname>/<pid>".
func WithHolder(h string) ClaimOption { return func(o *claimOptions) { o.holder = h } }

// WithTenant charges the seat to tenant t, subject to the pool's tenant
// limits. Default: no tenant.
func WithTenant(t string) ClaimOption { return func(o *claimOptions) { o.tenant = t } }

// WithInstance binds the seat to the named instance only.
func WithInstance(id string) ClaimOption { return func(o *claimOptions) { o.instance = id } }

// WithLabels binds the seat to an instance carrying all these labels, each
// with its value (a label given an empty value must be there, empty).
func WithLabels(sel map[string]string) ClaimOption {
	return func(o *claimOptions) { o.labels = sel }
}

// WithWait makes Claim queue and block, bounded by its ctx, until granted.
// Default: Claim returns ErrNoSeat at once when no seat is free.
func WithWait() ClaimOption { return func(o *claimOptions) { o.wait = true } }

func (o claimOptions) validate() error {
	if err := validHolder("holder", o.holder); err != nil {
		return err
	}
	if err := validLabels(o.labels); err != nil {
		return fmt.Errorf("labels: %w", err)
	}
	if o.tenant != "" {
		if err := ValidateName(o.tenant); err != nil {
			return fmt.Errorf("tenant: %w", err)
		}
	}
	if o.instance != "" {
		if err := ValidateName(o.instance); err != nil {
			return fmt.Errorf("instance: %w", err)
		}
	}
	return nil
}
