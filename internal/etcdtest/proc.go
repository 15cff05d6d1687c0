package etcdtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdpool/etcdpool/internal/embedetcd"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// Process members: each member of a ProcCluster is a real OS process (the
// test binary re-executed in member mode), so that faults are real signals:
// SIGKILL, SIGSTOP and SIGCONT. A test package that uses them calls
// RunMemberIfChild first thing in its TestMain.

const memberEnv = "ETCDTEST_MEMBER"

// RunMemberIfChild runs an etcd member and exits, when this process was
// started as one by a ProcCluster. Otherwise it returns at once.
func RunMemberIfChild() {
	v := os.Getenv(memberEnv)
	if v == "" {
		return
	}
	var cfg embedetcd.Config
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest member:", err)
		os.Exit(2)
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	srv, err := embedetcd.Start(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest member:", err)
		os.Exit(1)
	}
	<-sigc
	srv.Close()
	os.Exit(0)
}

// ProcCluster is a cluster of member processes on 127.0.0.1.
type ProcCluster struct {
	t    testing.TB
	cfgs []embedetcd.Config

	mu    sync.Mutex
	procs []*memberProc // nil while a member is down
}

type memberProc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped
}

// StartProcs starts n member processes that form one cluster, and kills
// them when the test ends.
func StartProcs(t testing.TB, n int) *ProcCluster {
	t.Helper()
	c := &ProcCluster{t: t, procs: make([]*memberProc, n)}
	var initial []string
	for i := range n {
		cfg := embedetcd.Config{Name: fmt.Sprintf("m%d", i), Dir: t.TempDir(),
			ClientAddr: testkit.FreeAddr(t), PeerAddr: testkit.FreeAddr(t), NoFsync: true}
		initial = append(initial, cfg.Name+"=http://"+cfg.PeerAddr)
		c.cfgs = append(c.cfgs, cfg)
	}
	for i := range c.cfgs {
		c.cfgs[i].InitialCluster = strings.Join(initial, ",")
		c.spawn(i)
	}
	t.Cleanup(c.Close)
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "etcdtest-ready", ""); err != nil {
		t.Fatalf("etcdtest: process cluster not ready: %v", err)
	}
	return c
}

func (c *ProcCluster) spawn(i int) *memberProc {
	b, _ := json.Marshal(c.cfgs[i])
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memberEnv+"="+string(b))
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("etcdtest: start member %d: %v", i, err)
	}
	mp := &memberProc{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(mp.exited) }() // reap; the exit is the fault under test
	c.mu.Lock()
	c.procs[i] = mp
	c.mu.Unlock()
	return mp
}

// Endpoints lists the client URLs of all members.
func (c *ProcCluster) Endpoints() []string {
	var eps []string
	for _, cfg := range c.cfgs {
		eps = append(eps, "http://"+cfg.ClientAddr)
	}
	return eps
}

// Client returns a client for all members, closed when the test ends.
func (c *ProcCluster) Client(t testing.TB) *clientv3.Client {
	return testkit.Client(t, c.Endpoints()...)
}

// Leader returns the index of the member that is leader, or -1 if none
// answers within d.
func (c *ProcCluster) Leader(cli *clientv3.Client, d time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		for i, ep := range c.Endpoints() {
			sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
			st, err := cli.Status(sctx, strings.TrimPrefix(ep, "http://"))
			scancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

// Signal sends sig to member i's process, if it is running.
func (c *ProcCluster) Signal(i int, sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[i]; p != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Kill SIGKILLs member i and waits until its ports are free.
func (c *ProcCluster) Kill(i int) {
	c.mu.Lock()
	p := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Restart starts a killed member i again on its ports and data dir, and
// waits until it serves; a start that fails (a port still held) is retried.
// A start that is only slow is left to finish: after an hour of churn a
// member replays (and, killed mid-write, repairs) a WAL of hundreds of MB,
// which takes longer than 10 s on a loaded 2-core machine, and killing it
// then only makes it start over.
func (c *ProcCluster) Restart(i int) {
	c.mu.Lock()
	running := c.procs[i] != nil
	c.mu.Unlock()
	if running {
		return
	}
	c.cfgs[i].ExistingCluster = true
	for try := 0; try < 20; try++ {
		mp := c.spawn(i)
		if c.serving(i, mp, 2*time.Minute) {
			return
		}
		c.Kill(i)
	}
	c.t.Errorf("etcdtest: member %d did not come back", i)
}

// serving waits until member i answers a status request, or its process
// exits, or d passes.
func (c *ProcCluster) serving(i int, mp *memberProc, d time.Duration) bool {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Endpoints()[i]}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return false
	}
	defer cli.Close()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case <-mp.exited:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := cli.Status(ctx, c.cfgs[i].ClientAddr)
		cancel()
		if err == nil {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// Close kills every member. It is safe to call more than once.
func (c *ProcCluster) Close() {
	for i := range c.cfgs {
		c.Kill(i)
	}
}
