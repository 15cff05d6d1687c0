package embedetcd

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestSecondMemberOnTheSameDirFailsFast starts a member, then a second one
// on the same data dir with other ports: it must fail at once with
// ErrDirInUse naming the dir, not block on etcd's database lock. Once the
// first is closed the dir can be used again.
func TestSecondMemberOnTheSameDirFailsFast(t *testing.T) {
	dir := t.TempDir()
	first, err := Start(Config{Dir: dir, ClientAddr: freeAddr(t), PeerAddr: freeAddr(t), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		srv *Server
		err error
	}
	res := make(chan result, 1)
	cfg := Config{Dir: dir, ClientAddr: freeAddr(t), PeerAddr: freeAddr(t), NoFsync: true}
	go func() {
		s, err := Start(cfg)
		res <- result{s, err}
	}()
	var r result
	select {
	case r = <-res:
	case <-time.After(10 * time.Second): // it would block on bbolt's lock for good
		t.Fatal("a second start on a data dir in use still blocks after 10s")
	}
	err = r.err
	if err == nil {
		r.srv.Close()
		first.Close()
		t.Fatal("a second member started on a data dir in use")
	}
	if !errors.Is(err, ErrDirInUse) || !strings.Contains(err.Error(), dir) {
		t.Errorf("second start: %v, want ErrDirInUse naming %s", err, dir)
	}
	first.Close()
	again, err := Start(Config{Dir: dir, ClientAddr: freeAddr(t), PeerAddr: freeAddr(t), NoFsync: true})
	if err != nil {
		t.Fatalf("start after the first closed: %v", err)
	}
	again.Close()
}
