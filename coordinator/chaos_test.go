package coordinator_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestChaos runs claimant processes (six, of two claimants each, sharing
// the process's Coordinator; one claim in four gives up after up to
// 300 ms; in every other process both claimants are of tenant "t", in the
// others one is, and the pool admits 2 seats per tenant, so held-back
// waiters take turns within a process and race across them; every seat
// binds to one of two instances of 3 seats in all, kept registered by an
// agent in the test process, chaos_agent_test.go; in two processes of
// three one claimant selects an instance, by label or by name, so that
// waiters are passed over and held back for their selectors too) against a
// 3-member etcd cluster of
// member processes while a nemesis kills and pauses etcd members and
// claimants, cuts claimants off, compacts, and changes capacity. Then the
// checkers replay etcd's history and the claimants' reports:
//
//   - capacity and FIFO at every revision (see history);
//   - fenced writes: every write guarded by IsOwner applied while its token
//     held its seat (must be 0 stale);
//   - loss before regrant: a holder that was neither killed nor paused saw
//     Done close before the txn that regranted its seat was sent;
//   - idle seats: no seat sat free while a waiter waited for longer than
//     TTL + an election + 2 s.
//
// It runs for 20 s in the default suite; ETCDPOOL_CHAOS=10m runs longer.
func TestChaos(t *testing.T) {
	dur := 20 * time.Second
	if v := os.Getenv("ETCDPOOL_CHAOS"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ETCDPOOL_CHAOS=%q: %v", v, err)
		}
		dur = d
	}
	ch := newChaos(t)
	ch.run(dur)
	ch.check()
}

const (
	chaosTTL      = 2 * time.Second
	chaosElection = time.Second // etcd's default election timeout
	// chaosElectionMax is the longest one election may take: raft draws
	// each member's timeout from [timeout, 2 × timeout).
	chaosElectionMax = 2 * chaosElection
	chaosPrefix      = "/chaos"
	// chaosWorkers is the claimants (sessions) in each claimant process.
	chaosWorkers = 2
	chaosFenced  = "/chaos-fenced/"
	// chaosTenant is the tenant of some claimants (spawn), held to
	// chaosTenantLimit seats.
	chaosTenant      = "t"
	chaosTenantLimit = 2
)

type chaos struct {
	t     *testing.T
	pc    *etcdtest.ProcCluster
	cli   *clientv3.Client
	c     *coordinator.Coordinator
	hist  *history
	wch   clientv3.WatchChan
	stopW context.CancelFunc

	mu        sync.Mutex
	events    []claimantEvent
	claimants []*claimantProc
	faults    map[string]int
	arrivals  map[int64]time.Time // revision -> when the history watch saw it
	seq       int

	idleSince   time.Time   // a seat free while someone waits, since
	idleWaiting int         // the most who waited in that stretch
	stretches   []stretch   // each such stretch
	elections   []time.Time // when the nemesis killed or stopped the leader
	cutoffs     []time.Time // when it killed, paused or cut off a claimant
	kills       []kill      // the claimants it SIGKILLed
	downs       []time.Time // when it killed a follower
	start       time.Time
	seen        int64    // the history has applied every revision up to this
	timeline    []string // faults and long idle stretches, for the log
}

type claimantProc struct {
	id      string
	cmd     *exec.Cmd
	proxies []*etcdtest.Proxy
	done    chan struct{}
	mu      sync.Mutex
	marks   []struct{ from, to time.Time } // killed or paused: its holds there are not judged
}

func newChaos(t *testing.T) *chaos {
	pc := etcdtest.StartProcs(t, 3)
	cli := pc.Client(t)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(chaosPrefix))
	testkit.CreatePool(t, c, "p", chaosSpec(3))
	wctx, stop := context.WithCancel(context.Background())
	h, wch := watchHistoryUnder(wctx, t, cli, chaosPrefix, chaosPrefix+"/pools/p/")
	h.fenced = chaosFenced
	ch := &chaos{t: t, pc: pc, cli: cli, c: c, hist: h, stopW: stop, faults: map[string]int{}, arrivals: map[int64]time.Time{}, start: time.Now()}
	ch.wch = wch
	return ch
}

func (ch *chaos) spawn() {
	ch.mu.Lock()
	ch.seq++
	id := fmt.Sprintf("c%02d", ch.seq)
	ch.mu.Unlock()
	cp := &claimantProc{id: id, done: make(chan struct{})}
	var eps []string
	for _, ep := range ch.pc.Endpoints() {
		p := etcdtest.NewProxy(ch.t, ep)
		cp.proxies = append(cp.proxies, p)
		eps = append(eps, p.URL())
	}
	tenants := []string{"", chaosTenant} // worker 1 of every process
	if ch.seq%2 == 0 {
		tenants[0] = chaosTenant
	}
	// Worker 0 of two processes in three selects instances: by label the
	// one of 2 seats, or by name the exclusive one.
	selects := []string{[]string{"", "zone=b", "i1"}[ch.seq%3]}
	cfg, _ := json.Marshal(claimantConfig{ID: id, Endpoints: eps, Prefix: chaosPrefix, Pool: "p", TTL: chaosTTL, Fenced: chaosFenced,
		Workers: chaosWorkers, Tenants: tenants, Selects: selects})
	cp.cmd = exec.Command(os.Args[0], "-test.run=^$")
	cp.cmd.Env = append(os.Environ(), claimantEnv+"="+string(cfg))
	cp.cmd.Stderr = os.Stderr
	out, err := cp.cmd.StdoutPipe()
	if err != nil {
		ch.t.Fatal(err)
	}
	if err := cp.cmd.Start(); err != nil {
		ch.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e claimantEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				e.Claimant = id
				ch.mu.Lock()
				ch.events = append(ch.events, e)
				ch.mu.Unlock()
			}
		}
		_ = cp.cmd.Wait()
		close(cp.done)
	}()
	ch.mu.Lock()
	ch.claimants = append(ch.claimants, cp)
	ch.mu.Unlock()
}

// mark records that claimant cp's holds in [from, to] are not judged by
// the loss-before-regrant checker: it was paused or killed.
func (cp *claimantProc) mark(from, to time.Time) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.marks = append(cp.marks, struct{ from, to time.Time }{from, to})
}

func (cp *claimantProc) marked(from, to time.Time) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, m := range cp.marks {
		if !m.to.Before(from) && !m.from.After(to) {
			return true
		}
	}
	return false
}

func (ch *chaos) run(dur time.Duration) {
	actx, stopAgent := context.WithCancel(context.Background())
	registered, agentDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(agentDone); ch.agent(actx, registered) }()
	defer func() { stopAgent(); <-agentDone }()
	select {
	case <-registered:
	case <-time.After(30 * time.Second):
		ch.t.Fatal("the chaos pool's instances were not registered within 30s")
	}
	for range 6 {
		ch.spawn()
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){ch.nemesis, ch.compactor} {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}
	hctx, stopHistory := context.WithCancel(context.Background())
	histDone := make(chan struct{})
	go func() { defer close(histDone); ch.history(hctx) }()
	<-ctx.Done()
	wg.Wait()
	ch.heal()
	time.Sleep(2 * chaosTTL) // every waiter that can be served is served
	ch.mu.Lock()
	cps := slices.Clone(ch.claimants)
	ch.mu.Unlock()
	for _, cp := range cps {
		_ = cp.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, cp := range cps {
		select {
		case <-cp.done:
		case <-time.After(30 * time.Second):
			ch.t.Errorf("claimant %s did not exit after SIGTERM; its goroutines follow on stderr", cp.id)
			_ = cp.cmd.Process.Signal(syscall.SIGQUIT)
			<-cp.done
		}
	}
	ch.waitHistory()
	stopHistory()
	<-histDone
	ch.stopW()
}

// heal ends every fault: members up and running, claimants resumed and
// connected.
func (ch *chaos) heal() {
	for i := range 3 {
		ch.pc.Signal(i, syscall.SIGCONT)
		ch.pc.Restart(i)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, cp := range ch.claimants {
		_ = cp.cmd.Process.Signal(syscall.SIGCONT)
		for _, p := range cp.proxies {
			p.Restore()
		}
	}
}

func (ch *chaos) fault(kind string) {
	ch.mu.Lock()
	ch.faults[kind]++
	if strings.HasPrefix(kind, "claimant-") {
		ch.cutoffs = append(ch.cutoffs, time.Now())
	}
	if kind != "compaction" {
		ch.timeline = append(ch.timeline, fmt.Sprintf("%6.2fs %s", time.Since(ch.start).Seconds(), kind))
	}
	ch.mu.Unlock()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// nemesis injects one fault at a time, 0.5 to 2 s apart.
func (ch *chaos) nemesis(ctx context.Context) {
	for ctx.Err() == nil {
		sleepCtx(ctx, time.Duration(500+rand.IntN(1500))*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
		switch rand.IntN(8) {
		case 0:
			ch.memberFault("leader-kill", true, func(i int) { ch.pc.Kill(i); time.Sleep(time.Second); ch.pc.Restart(i) })
		case 1:
			ch.memberFault("leader-sigstop", true, func(i int) {
				ch.pc.Signal(i, syscall.SIGSTOP)
				time.Sleep(2 * time.Second)
				ch.pc.Signal(i, syscall.SIGCONT)
			})
		case 2:
			ch.memberFault("follower-kill", false, func(i int) { ch.pc.Kill(i); time.Sleep(time.Second); ch.pc.Restart(i) })
		case 3:
			cp := ch.victim()
			from := time.Now()
			ch.fault("claimant-sigkill")
			ch.mu.Lock()
			ch.kills = append(ch.kills, kill{cp.id, from})
			ch.mu.Unlock()
			_ = cp.cmd.Process.Kill()
			<-cp.done
			cp.mark(from, time.Now().Add(time.Hour))
			ch.spawn()
		case 4:
			cp := ch.victim()
			from := time.Now()
			ch.fault("claimant-sigstop")
			_ = cp.cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(chaosTTL + time.Second)
			_ = cp.cmd.Process.Signal(syscall.SIGCONT)
			cp.mark(from, time.Now().Add(200*time.Millisecond))
		case 5:
			cp := ch.victim()
			ch.fault("claimant-blackhole")
			for _, p := range cp.proxies {
				p.Blackhole()
			}
			time.Sleep(chaosTTL + time.Second)
			for _, p := range cp.proxies {
				p.Restore()
			}
		default:
			n := 1 + rand.IntN(4)
			if _, err := ch.c.UpdatePool(ctx, "p", chaosSpec(n), 0); err == nil {
				ch.fault(fmt.Sprintf("capacity-change to %d", n))
			}
		}
	}
}

func (ch *chaos) memberFault(kind string, leader bool, f func(int)) {
	l := ch.pc.Leader(ch.cli, 5*time.Second)
	if l < 0 {
		return
	}
	i := l
	if !leader {
		i = (l + 1 + rand.IntN(2)) % 3
	}
	ch.fault(kind)
	ch.mu.Lock()
	if leader {
		ch.elections = append(ch.elections, time.Now())
	} else {
		ch.downs = append(ch.downs, time.Now())
	}
	ch.mu.Unlock()
	f(i)
}

// victim picks a live claimant.
func (ch *chaos) victim() *claimantProc {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for {
		cp := ch.claimants[rand.IntN(len(ch.claimants))]
		select {
		case <-cp.done:
		default:
			return cp
		}
	}
}

// compactor compacts every 200 ms, up to the revision the history
// watcher has seen, so that lagging watches of claimants are compacted away
// but the checker's is not.
func (ch *chaos) compactor(ctx context.Context) {
	for ctx.Err() == nil {
		sleepCtx(ctx, 200*time.Millisecond)
		ch.mu.Lock()
		var rev int64
		for r := range ch.arrivals {
			rev = max(rev, r)
		}
		ch.mu.Unlock()
		if rev > 1 {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			if _, err := ch.cli.Compact(cctx, rev-1); err == nil {
				ch.fault("compaction")
			}
			cancel()
		}
	}
}

// history feeds the history checker as events arrive, noting when each
// revision was seen.
func (ch *chaos) history(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case wr, ok := <-ch.wch:
			if !ok || wr.Err() != nil {
				ch.t.Errorf("history watch ended: %v", wr.Err())
				return
			}
			ch.apply(wr)
		}
	}
}

func (ch *chaos) apply(wr clientv3.WatchResponse) {
	now := time.Now()
	ch.mu.Lock()
	for _, ev := range wr.Events {
		ch.arrivals[ev.Kv.ModRevision] = now
	}
	ch.mu.Unlock()
	groupByRevision(wr.Events, ch.hist.revision)
	ch.idle(now)
	ch.mu.Lock()
	ch.seen = max(ch.seen, wr.Header.Revision)
	ch.mu.Unlock()
}

// waitHistory waits until the history has applied every revision so far.
func (ch *chaos) waitHistory() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	end, err := ch.cli.Get(ctx, "end-marker")
	if err != nil {
		ch.t.Fatal(err)
	}
	for ctx.Err() == nil {
		ch.mu.Lock()
		seen := ch.seen
		ch.mu.Unlock()
		if seen >= end.Header.Revision {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	ch.t.Fatalf("history did not reach revision %d", end.Header.Revision)
}

// chaosSpec is the chaos pool's spec at capacity n.
func chaosSpec(n int) coordinator.PoolSpec {
	return coordinator.PoolSpec{Capacity: n, TenantLimit: chaosTenantLimit}
}
