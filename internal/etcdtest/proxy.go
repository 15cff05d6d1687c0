package etcdtest

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one etcd member, for
// injecting faults between a client and the server.
type Proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	drop  bool          // answers are dropped
	hole  bool          // requests are dropped too
	holdc chan struct{} // non-nil while answers are held back; closed to let them go
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to target (a URL or host:port). It stops when the
// test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: proxy listen: %v", err)
	}
	p := &Proxy{l: l, target: strings.TrimPrefix(target, "http://"), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// URL is the client URL to dial instead of the member's.
func (p *Proxy) URL() string { return "http://" + p.l.Addr().String() }

// DropResponses keeps forwarding requests to etcd but throws its answers
// away: every request's outcome becomes unknown to the client.
func (p *Proxy) DropResponses() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = true
}

// Blackhole drops traffic both ways while keeping connections open, like a
// partition that the client has not noticed yet.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop, p.hole = true, true
}

// HoldResponses keeps forwarding requests but holds etcd's answers back, in
// order, until Deliver or Restore: the client sees a slow network, and every
// answer arrives late but intact.
func (p *Proxy) HoldResponses() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holdc == nil {
		p.holdc = make(chan struct{})
	}
}

// Deliver lets the answers held by HoldResponses through, on the same
// connections.
func (p *Proxy) Deliver() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holdc != nil {
		close(p.holdc)
		p.holdc = nil
	}
}

// Restore closes every connection (whose streams lost bytes) and forwards
// new ones both ways again.
func (p *Proxy) Restore() {
	p.Deliver()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop, p.hole = false, false
	for c := range p.conns {
		c.Close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.l.Close()
	p.Restore()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c, false)
		go p.pipe(c, s, true)
	}
}

// pipe copies src to dst; answers (from the server) are dropped while drop
// is set.
func (p *Proxy) pipe(dst, src net.Conn, answers bool) {
	defer p.wg.Done()
	defer func() {
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := (answers && p.drop) || p.hole
			hold := p.holdc
			p.mu.Unlock()
			if answers && hold != nil {
				<-hold
			}
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return // EOF or a closed connection: this direction is done
		}
	}
}
