package webui

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"time"
)

// Path is where the view is served: the page at Path, its event stream at
// Path + "events".
const Path = "/ui/"

// pingEvery keeps idle event streams open through proxies.
const pingEvery = 15 * time.Second

//go:embed static
var static embed.FS

// Handler serves the page under Path and its event stream from h. It
// answers GET and HEAD only.
func Handler(h *Hub) http.Handler {
	files, _ := fs.Sub(static, "static")
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, http.StripPrefix(Path, http.FileServerFS(files)))
	mux.HandleFunc("GET "+Path+"events", h.serveEvents)
	return secure(mux)
}

// secure adds headers that keep the page to its own assets.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// serveEvents streams a snapshot, then changes and pool views, as
// server-sent events until the page goes away or the hub stops.
func (h *Hub) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch := h.subscribe(r.Context())
	if ch == nil {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer h.unsubscribe(ch)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	fmt.Fprint(w, "retry: 2000\n\n")
	fl.Flush()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", m.event, m.data)
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
		case <-r.Context().Done():
			return
		}
		fl.Flush()
	}
}
