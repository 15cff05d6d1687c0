package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/termsafe"
)

// Server serves the API. It keeps no state a client depends on: any
// number of replicas may serve the same etcd prefix, and a client may send
// each request to any of them.
type Server struct {
	co    *coordinator.Coordinator
	cli   *clientv3.Client
	auth  *authenticator
	ss    *sessions
	log   *slog.Logger
	opts  options
	mux   *http.ServeMux
	stop  context.CancelFunc
	wg    sync.WaitGroup
	close sync.Once
}

// Option configures a Server.
type Option func(*options)

type options struct {
	logger    *slog.Logger  // default: discard
	timeout   time.Duration // bound on each etcd request; default 5s
	maxWait   time.Duration // longest claim wait; default 5m
	idle      time.Duration // a replica forgets an unused session after this; default 1m
	anonymous bool          // default false
}

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRequestTimeout bounds the etcd requests of one API request (a claim's
// wait excluded). Default 5s.
func WithRequestTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithMaxWait bounds the wait a claim may ask for. Default 5m.
func WithMaxWait(d time.Duration) Option { return func(o *options) { o.maxWait = d } }

// WithSessionIdle sets how long a replica keeps an unused session in its
// cache (and keeps following its lease). Default 1m.
func WithSessionIdle(d time.Duration) Option { return func(o *options) { o.idle = d } }

// WithAnonymous serves requests without credentials as Anonymous, which
// may do everything. Only for plain HTTP on loopback (poolagent dev).
// Default: such requests get 401.
func WithAnonymous() Option { return func(o *options) { o.anonymous = true } }

// New returns a Server acting through co for principals. The principals
// must pass ValidatePrincipals; an invalid option is an error. Close it to
// stop its background work.
func New(co *coordinator.Coordinator, principals []Principal, opts ...Option) (*Server, error) {
	o := options{logger: slog.New(slog.DiscardHandler), timeout: 5 * time.Second, maxWait: 5 * time.Minute, idle: time.Minute}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case co == nil:
		return nil, fmt.Errorf("%w: nil coordinator", ErrInvalidInput)
	case o.logger == nil || o.timeout <= 0 || o.maxWait <= 0 || o.idle <= 0:
		return nil, fmt.Errorf("%w: logger must be set and timeouts positive", ErrInvalidInput)
	case len(principals) == 0 && !o.anonymous:
		return nil, fmt.Errorf("%w: no principals: nobody could use the API", ErrInvalidInput)
	}
	if err := ValidatePrincipals(principals); err != nil {
		return nil, fmt.Errorf("%w: principals%v", ErrInvalidInput, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{
		co: co, cli: co.Client(), auth: newAuthenticator(append([]Principal(nil), principals...), o.anonymous),
		ss: newSessions(co.Client(), co.Prefix(), o.idle), log: o.logger, opts: o, stop: stop,
	}
	s.routes()
	s.wg.Add(1)
	go s.sweep(ctx)
	return s, nil
}

// Handler returns the API's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops following borrowed leases and waits for background work. It
// does not revoke any session. It is idempotent.
func (s *Server) Close() {
	s.close.Do(func() {
		s.stop()
		s.wg.Wait()
		s.ss.closeAll()
	})
}

// sweep drops idle sessions from the cache until ctx ends.
func (s *Server) sweep(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.idle / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.ss.sweep(now)
		}
	}
}

// handlerFunc is an API handler: it gets the authenticated principal and
// returns an error for statusOf, or nil once it has written its answer.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p *Principal) error

// routes registers every endpoint. The OpenAPI document lists the same
// routes; a test checks that they agree.
func (s *Server) routes() {
	s.mux = http.NewServeMux()
	for _, rt := range s.table() {
		s.mux.Handle(rt.pattern, s.wrap(rt))
	}
	s.mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: %s %s", ErrNotFound, r.Method, r.URL.Path))
	})
}

// route is one endpoint and the operation it needs on its {pool}.
type route struct {
	pattern string
	op      Operation
	h       handlerFunc
}

// table lists the endpoints: method and path, as http.ServeMux takes them,
// and the operation each needs.
func (s *Server) table() []route {
	return []route{
		{"POST /v1/sessions", OpClaim, s.createSession},
		{"POST /v1/sessions/{session}/keepalive", OpClaim, s.keepAlive},
		{"DELETE /v1/sessions/{session}", OpClaim, s.deleteSession},
		{"POST /v1/pools/{pool}/claims", OpClaim, s.claim},
		{"DELETE /v1/pools/{pool}/seats/{seat}", OpClaim, s.release},
		{"GET /v1/pools/{pool}/seats/{seat}/events", OpClaim, s.lossStream},
		{"GET /v1/pools", OpRead, s.listPools},
		{"GET /v1/pools/{pool}", OpRead, s.getPool},
		{"PUT /v1/pools/{pool}", OpAdmin, s.putPool},
		{"GET /v1/pools/{pool}/seats", OpRead, s.listSeats},
		{"GET /v1/pools/{pool}/queue", OpRead, s.listQueue},
		{"GET /v1/pools/{pool}/instances", OpRead, s.listInstances},
		{"GET /v1/pools/{pool}/events", OpRead, s.events},
		{"POST /v1/pools/{pool}/seats/{seat}/force-release", OpForceRelease, s.forceRelease},
		{"POST /v1/pools/{pool}/instances/{instance}/drain", OpDrain, s.drain},
	}
}

// wrap authenticates the request, checks its {pool} (if it has one) is a
// pool name and that the principal may perform the route's operation on
// it, runs the handler and writes its error. The name is checked first: a
// name no pool can have (a%2Fb) is the request's fault, 400, not a
// matter of grants, 403 (found by a review, 2026-12-05).
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.auth.authenticate(r)
		if pool := r.PathValue("pool"); err == nil && pool != "" {
			if verr := coordinator.ValidateName(pool); verr != nil {
				err = fmt.Errorf("pool: %w", verr)
			}
		}
		if err == nil {
			err = p.may(rt.op, r.PathValue("pool"))
		}
		if err == nil {
			err = rt.h(w, r, p)
		}
		if err != nil {
			status, body := statusOf(err)
			if status >= 500 {
				ref := errorRef()
				s.log.Warn("api request failed", "method", r.Method, "path", r.URL.Path, "ref", ref, "err", err)
				if status == http.StatusInternalServerError {
					body.Message = internalMessage(ref)
				}
			}
			writeBody(w, status, body)
		}
	})
}

// maxBody bounds a request body.
const maxBody = 1 << 20

// decode reads r's JSON body into v, strictly: unknown fields and trailing
// data are errors. An empty body leaves v as it is.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: request body: %v", ErrInvalidInput, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) { // dec.More misses a stray '}' or ']'
		return fmt.Errorf("%w: request body: trailing data after the JSON object", ErrInvalidInput)
	}
	return nil
}

// reqCtx bounds a request's etcd work by the request timeout.
func (s *Server) reqCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.opts.timeout)
}

// printable refuses text a client gives for operators to read (a holder,
// a label, a reason) that holds control or bidirectional override
// characters (termsafe), as poolctl refuses them where it writes: they
// would act on a terminal, or reorder what it shows. The library takes any
// valid UTF-8, since records older clients wrote must still be read;
// poolctl escapes what it prints. Found by a review (2026-12-05): the API
// took a holder with U+202E and U+009B, and -o yaml failed for the pool.
func printable(what, s string) error {
	if err := termsafe.Check(s); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidInput, what, err)
	}
	return nil
}
