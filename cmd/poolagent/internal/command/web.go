package command

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/webui"
)

// Values of --web-listen besides host:port.
const (
	webShared = ""    // on the metrics and health listener, under /ui/
	webOff    = "off" // no web view
)

// webFlag adds --web-listen to fs with the mode's default.
func webFlag(fs *pflag.FlagSet, p *string, def string) {
	fs.StringVar(p, "web-listen", def, `host:port of the read-only web view (page at /ui/); "" serves it on --listen, "off" disables it`)
}

// webConfig is where the web view is served: not at all, on the agent's
// listener, or on its own listener.
type webConfig struct {
	on bool
	ln net.Listener // nil: on the agent's listener
}

// listenWeb resolves --web-listen, listening now so that a port in use is
// reported before the agent starts.
func listenWeb(addr string) (webConfig, error) {
	switch addr {
	case webOff:
		return webConfig{}, nil
	case webShared:
		return webConfig{on: true}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return webConfig{}, fmt.Errorf("listen on --web-listen %s: %w", addr, err)
	}
	return webConfig{on: true, ln: ln}, nil
}

// close releases a listener that was never served.
func (w webConfig) close() {
	if w.ln != nil {
		w.ln.Close()
	}
}

// startWeb starts the web view's hub until ctx ends. It returns the
// handler to serve on the agent's listener (h, with the view mounted if it
// shares it) and a function that waits for the hub and the view's own
// server, if any, to stop once ctx has ended.
func (r agentRun) startWeb(ctx context.Context, co *coordinator.Coordinator, h http.Handler) (http.Handler, func() error) {
	if !r.web.on {
		return h, func() error { return nil }
	}
	hub := webui.NewHub(co, r.pools, r.cfg.Etcd.DialTimeout.D(), r.log)
	hubDone := make(chan struct{})
	go func() {
		defer close(hubDone)
		hub.Run(ctx)
	}()
	view := webui.Handler(hub)
	mux := http.NewServeMux()
	mux.Handle(webui.Path, view)
	if r.web.ln == nil {
		mux.Handle("/", h)
		r.log.Info("web view", "url", "http://"+r.ln.Addr().String()+webui.Path)
		return mux, func() error { <-hubDone; return nil }
	}
	mux.Handle("GET /{$}", http.RedirectHandler(webui.Path, http.StatusFound))
	r.log.Info("web view", "url", "http://"+r.web.ln.Addr().String()+webui.Path)
	stopWeb := serveHTTP(r.web.ln, mux)
	return h, func() error {
		<-hubDone // ends every page's stream, so that the server can stop
		return stopWeb()
	}
}

// webURL returns the web view's URL, or "" when it is off; listen is the
// agent's listener.
func webURL(web webConfig, listen string) string {
	if !web.on {
		return ""
	}
	if web.ln != nil {
		listen = web.ln.Addr().String()
	}
	return "http://" + listen + webui.Path
}
