package command

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"github.com/etcdpool/etcdpool/internal/httpapi"
	"github.com/etcdpool/etcdpool/internal/roles"
)

// startAPI serves the HTTP API (internal/httpapi) on cfg.API.Listen through
// co, with TLS when configured, until the returned stop is called. It
// does nothing, and stop returns nil, when api.listen is empty. The config
// has been validated: plain HTTP and anonymous access are on loopback.
func startAPI(co *coordinator.Coordinator, cfg config.Config, log *slog.Logger) (stop func() error, err error) {
	a := cfg.API
	if a.Listen == "" {
		return func() error { return nil }, nil
	}
	opts := []httpapi.Option{httpapi.WithLogger(log), httpapi.WithRequestTimeout(cfg.Etcd.DialTimeout.D())}
	if a.MaxWait > 0 {
		opts = append(opts, httpapi.WithMaxWait(a.MaxWait.D()))
	}
	if a.Anonymous() {
		opts = append(opts, httpapi.WithAnonymous())
	}
	srv, err := httpapi.New(co, a.Principals, opts...)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	ln, err := apiListener(a)
	if err != nil {
		srv.Close()
		return nil, err
	}
	scheme := "http"
	if a.TLS.Enabled() {
		scheme = "https"
	}
	log.Info("http api serving", "url", scheme+"://"+ln.Addr().String()+"/v1/", "principals", len(a.Principals), "anonymous", a.Anonymous())
	stopHTTP := serveAPI(ln, srv.Handler())
	return func() error {
		err := stopHTTP()
		srv.Close()
		return err
	}, nil
}

// apiListener listens on api.listen, with TLS when configured.
func apiListener(a config.API) (net.Listener, error) {
	var tcfg *tls.Config
	if a.TLS.Enabled() {
		var err error
		if tcfg, err = httpapi.TLSConfig(a.TLS.CertFile, a.TLS.KeyFile, a.TLS.ClientCAFile); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", a.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on api.listen %s: %w", a.Listen, err)
	}
	if tcfg != nil {
		ln = tls.NewListener(ln, tcfg)
	}
	return ln, nil
}

// apiIdleTimeout is how long the API keeps an idle keep-alive connection.
var apiIdleTimeout = 2 * time.Minute

// serveAPI serves h on ln until stop is called. Stopping cancels every
// request's context first (cause httpapi.ErrServerStopping, so that a loss
// stream says "closed"), so that waiting claims and event streams end at
// once, then closes the server.
func serveAPI(ln net.Listener, h http.Handler) (stop func() error) {
	base, cancelCause := context.WithCancelCause(context.Background())
	cancel := func() { cancelCause(httpapi.ErrServerStopping) }
	// IdleTimeout: a keep-alive connection that sends no request for that
	// long is closed, so that idle clients, or unauthenticated ones, cannot
	// hold the server's sockets for good (found by a review, 2026-12-05).
	// No ReadTimeout: it would cut the streams and waiting claims, whose
	// requests last; request bodies are bounded in size (httpapi).
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: apiIdleTimeout, BaseContext: func(net.Listener) context.Context { return base }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return func() error {
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("api: http server: %w", err)
		}
		return nil
	}
}

// apiAccess is what the API needs in etcd when it is configured: the
// operator role (write on every pool, and on <root>/api/ for sessions).
func apiAccess(cfg config.Config) []etcdclient.Access {
	if cfg.API.Listen == "" {
		return nil
	}
	return roles.Permissions(cfg.Prefix, "", roles.Operator)
}
