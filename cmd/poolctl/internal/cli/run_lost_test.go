//go:build unix

package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestRunSeatLost takes the seat away while the command runs, in every way
// a seat can be lost, and checks that the command's whole process group is
// stopped, that run exits 7 with one line saying why, and that nothing is
// left bound to its session. A command that ignores SIGTERM gets
// --kill-grace after an operator's force-release or its instance's loss
// (TestRunInstanceGoneHoldsSeatUntilCommandEnds), and none after its
// lease's end on the server, which frees the seat at once (until
// 2026-12-04, a review: --kill-grace, 10 s by default, ran on while the
// seat could be granted again). After a session's local deadline, see
// TestRunLossGraceInMargin.
func TestRunSeatLost(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 4})
	agent := h.session(10 * time.Second)
	ctx := testkit.Ctx(t, 60*time.Second)
	if _, err := h.c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "node-1", Seats: 4}); err != nil {
		t.Fatal(err)
	}
	before := h.leases(t)
	// The shell's own "Terminated" notices go to a file: stderr must hold
	// poolctl's one line only.
	traps := `exec 2>"$D/stderr"; trap 'echo term > "$D/term"; exit 143' TERM; ` + loop
	ignoresTerm := `exec 2>"$D/stderr"; trap '' TERM; ` + loop
	forceRelease := func(t *testing.T, s coordinator.Seat) { h.run("release", "p", itoa(s.Seat), "--force").want(t, ExitOK) }
	revoke := func(t *testing.T, s coordinator.Seat) { etcdtest.Revoke(t, h.cli, s.Lease) }
	tests := []struct {
		name   string
		flags  []string
		script string
		take   func(t *testing.T, s coordinator.Seat)
		why    string        // in the message
		term   bool          // the command has time to handle SIGTERM
		within time.Duration // SIGKILL within this of the loss (0: not checked)
	}{
		{"force-released with token", nil, traps, func(t *testing.T, s coordinator.Seat) {
			h.run("release", "p", itoa(s.Seat), "--token", itoa64(s.Token), "--reason", "stuck").want(t, ExitOK)
		}, "seat force-released: by", true, 0},
		{"lease revoked", nil, traps, revoke, "session expired", false, 0},
		{"instance gone", []string{"--instance", "node-1"}, traps, func(t *testing.T, s coordinator.Seat) {
			if err := h.c.DeregisterInstance(ctx, "p", "node-1"); err != nil {
				t.Fatal(err)
			}
		}, "instance gone: node-1", true, 0},
		{"ignores SIGTERM, force-released", []string{"--kill-grace", "300ms"}, ignoresTerm, forceRelease, "sent SIGKILL", false, 0},
		{"ignores SIGTERM, lease revoked", []string{"--kill-grace", "5s"}, ignoresTerm, revoke, "sent SIGKILL", false, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, inv := t.TempDir(), newInvocation()
			holder := strings.ReplaceAll(tt.name, " ", "-")
			wait := h.runChild(t, inv, dir, append([]string{"p", "--holder", holder}, tt.flags...), tt.script)
			waitFile(t, filepath.Join(dir, "ready"))
			tt.take(t, h.heldBy(t, "p", holder))
			start := time.Now()
			r := wait()
			r.want(t, ExitSeatLost)
			if !strings.Contains(r.err, tt.why) {
				t.Errorf("stderr %q does not say %q", r.err, tt.why)
			}
			if strings.Contains(r.err, "still ran") { // the tree dies within ms of SIGKILL (a review, 2026-12-05: said so at once)
				t.Errorf("stderr %q says part of the command outlived SIGKILL", r.err)
			}
			if tt.term && !exists(filepath.Join(dir, "term")) {
				t.Error("the command did not get SIGTERM")
			}
			if took := time.Since(start); tt.within > 0 && took > tt.within {
				t.Errorf("run ended %v after the loss; want SIGKILL within %v, before the seat could be granted again", took, tt.within)
			}
			if strings.Contains(tt.name, "force-released") && tt.script == ignoresTerm && time.Since(start) < 300*time.Millisecond {
				t.Errorf("SIGKILL came %v after the force-release, before --kill-grace", time.Since(start))
			}
			if got := h.leases(t); len(got) != len(before) {
				t.Errorf("leases after run %v, want %v", got, before)
			}
		})
		if tt.name == "instance gone" { // put it back for the next case
			if _, err := h.c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "node-1", Seats: 4}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRunInstanceGoneHoldsSeatUntilCommandEnds: the instance a command's
// seat is bound to goes, and the command ignores SIGTERM. The seat, with
// the instance's slot, stays held until the command is gone, however long
// --kill-grace (here longer than the session's TTL); only then does run
// free it. Before 2026-12-05 the claim freed its seat as its Done closed,
// and the instance could be bound again within milliseconds while the
// command still ran (SIGKILL at once).
func TestRunInstanceGoneHoldsSeatUntilCommandEnds(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 4})
	agent := h.session(10 * time.Second)
	ctx := testkit.Ctx(t, 60*time.Second)
	if _, err := h.c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "node-1"}); err != nil {
		t.Fatal(err)
	}
	events := h.c.Watch(ctx, "p")
	dir, inv := t.TempDir(), newInvocation()
	const grace = 3500 * time.Millisecond // over the TTL of 2s
	wait := h.runChild(t, inv, dir, []string{"p", "--holder", "h", "--instance", "node-1", "--ttl", "2s", "--kill-grace", grace.String()},
		`exec 2>"$D/stderr"; trap 'echo term > "$D/term"' TERM; `+loop)
	waitFile(t, filepath.Join(dir, "ready"))
	s := h.heldBy(t, "p", "h")
	if err := h.c.DeregisterInstance(ctx, "p", "node-1"); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	waitFile(t, filepath.Join(dir, "term"))
	ended := make(chan result, 1)
	go func() { ended <- wait() }()
	for time.Since(gone) < grace-500*time.Millisecond {
		select {
		case r := <-ended:
			t.Fatalf("run ended %v after the instance went, before --kill-grace: %+v", time.Since(gone), r)
		case <-time.After(100 * time.Millisecond):
		}
		cur, err := h.c.Seat(ctx, "p", s.Seat)
		if err != nil || cur.Token != s.Token {
			t.Fatalf("%v after the instance went, with the command still running, the seat is %+v, %v; want still held under token %d",
				time.Since(gone), cur, err, s.Token)
		}
	}
	r := <-ended
	r.want(t, ExitSeatLost)
	if !strings.Contains(r.err, "instance gone: node-1") || !strings.Contains(r.err, "sent SIGKILL") {
		t.Errorf("stderr %q does not say the instance went and the command was killed", r.err)
	}
	if _, err := h.c.Seat(ctx, "p", s.Seat); !errors.Is(err, coordinator.ErrSeatNotFound) {
		t.Errorf("after run: seat %d: %v, want ErrSeatNotFound", s.Seat, err)
	}
	// run released the seat, recording the instance's loss, rather than
	// revoking its lease, which the pool's events would call an expiry.
	for ev := range events {
		if ev.Seat == s.Seat && ev.Type != coordinator.EventSeatClaimed {
			if ev.LossReason() != coordinator.ReasonInstanceGone {
				t.Errorf("the seat's end: event %s, loss reason %q; want %q", ev.Type, ev.LossReason(), coordinator.ReasonInstanceGone)
			}
			break
		}
	}
}

// TestRunInstanceGoneGraceEndsWithSession: after its instance went, run's
// command gets --kill-grace because the seat stays held; but run is cut off
// from etcd during that grace, so its session ends and the seat with it.
// The command must then be killed before the instance, registered again,
// can be bound to another claim. Found by a review (2026-12-05): it ran on
// for the rest of a 15 s grace while another claim held the instance.
func TestRunInstanceGoneGraceEndsWithSession(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 4})
	ctx := testkit.Ctx(t, 60*time.Second)
	agent := h.session(30 * time.Second)
	if _, err := h.c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "node-1"}); err != nil {
		t.Fatal(err)
	}
	px := etcdtest.NewProxy(t, h.eps)
	dir, inv := t.TempDir(), newInvocation()
	inv.vars["D"] = dir
	script := `exec 2>"$D/stderr"; trap 'touch "$D/term"' TERM; echo $$ > "$D/pid"; touch "$D/ready"; while :; do sleep 0.05; done`
	done := make(chan result, 1)
	go func() {
		code := Main([]string{"--endpoints", px.URL(), "run", "p", "--instance", "node-1", "--ttl", "2s", "--kill-grace", "15s", "--", "sh", "-c", script}, inv.env)
		done <- result{code: code, out: inv.out.String(), err: inv.err.String()}
	}()
	waitFile(t, filepath.Join(dir, "ready"))
	pid := readPid(t, filepath.Join(dir, "pid"))
	if err := h.c.DeregisterInstance(ctx, "p", "node-1"); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "term")) // run saw ErrInstanceGone: SIGTERM, and 15 s of grace
	px.Blackhole()                          // run's host cut off from etcd
	if _, err := h.c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "node-1"}); err != nil {
		t.Fatal(err)
	}
	other, err := h.c.Claim(ctx, h.session(10*time.Second), "p", coordinator.WithInstance("node-1"), coordinator.WithWait())
	if err != nil {
		t.Fatal(err)
	}
	if !testkit.PidGone(pid) {
		t.Errorf("node-1 bound to another claim (token %d) while the first command still runs", other.Token())
	}
	px.Restore()
	r := <-done
	r.want(t, ExitSeatLost)
	if !strings.Contains(r.err, "sent SIGKILL") {
		t.Errorf("stderr %q does not say the command was killed", r.err)
	}
}

// TestRunStopsGrandchildren checks that the whole process group goes: after
// a forced release, and after the command exits leaving a child behind.
func TestRunStopsGrandchildren(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 2})
	t.Run("seat lost", func(t *testing.T) {
		dir, inv := t.TempDir(), newInvocation()
		wait := h.runChild(t, inv, dir, []string{"p", "--holder", "forker"}, `sleep 300 & echo $! > "$D/pid"; wait`)
		pid := readPid(t, filepath.Join(dir, "pid"))
		h.run("release", "p", itoa(h.heldBy(t, "p", "forker").Seat), "--force").want(t, ExitOK)
		wait().want(t, ExitSeatLost)
		testkit.Eventually(t, 5*time.Second, "grandchild to go", func() bool { return testkit.PidGone(pid) })
	})
	t.Run("command exited leaving a setsid'd child", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("only Linux's guard finds processes that left the process group")
		}
		dir, inv := t.TempDir(), newInvocation()
		r := h.runChild(t, inv, dir, []string{"p"}, `setsid sh -c 'echo $$ > "$D/pid"; exec sleep 300' & while [ ! -s "$D/pid" ]; do sleep 0.01; done; exit 0`)()
		r.want(t, ExitOK)
		if pid := readPid(t, filepath.Join(dir, "pid")); !testkit.PidGone(pid) {
			t.Errorf("the command's setsid'd child %d still runs after run returned", pid)
		}
	})
	t.Run("command exited", func(t *testing.T) {
		dir, inv := t.TempDir(), newInvocation()
		r := h.runChild(t, inv, dir, []string{"p"}, `sleep 300 & echo $! > "$D/pid"; exit 0`)()
		r.want(t, ExitOK)
		if pid := readPid(t, filepath.Join(dir, "pid")); !testkit.PidGone(pid) {
			t.Errorf("the command's background child %d still runs after run returned", pid)
		}
	})
}

// TestRunLossGraceInMargin: run's session is cut off from etcd, and its
// command ignores SIGTERM for 8 s. The session ends at its local deadline,
// and the command must be dead before a waiter elsewhere is granted the
// seat: SIGKILL follows SIGTERM within half the session's margin, not
// --kill-grace (10 s by default). Found by a review (2026-12-04): the
// command ran 7.4 s after the seat was granted again.
func TestRunLossGraceInMargin(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 1})
	px := etcdtest.NewProxy(t, h.eps)
	dir, inv := t.TempDir(), newInvocation()
	inv.vars["D"] = dir
	script := `trap 'sleep 8; exit 143' TERM; echo $$ > "$D/pid"; touch "$D/ready"; while :; do sleep 0.05; done`
	done := make(chan result, 1)
	go func() {
		code := Main([]string{"--endpoints", px.URL(), "run", "p", "--ttl", "2s", "--", "sh", "-c", script}, inv.env)
		done <- result{code: code, out: inv.out.String(), err: inv.err.String()}
	}()
	waitFile(t, filepath.Join(dir, "ready"))
	pid := readPid(t, filepath.Join(dir, "pid"))
	px.Blackhole()
	ctx := testkit.Ctx(t, 30*time.Second)
	if _, err := h.c.Claim(ctx, h.session(10*time.Second), "p", coordinator.WithWait()); err != nil {
		t.Fatal(err)
	}
	if !testkit.PidGone(pid) {
		t.Error("the cut-off command still ran when its seat was granted to another")
	}
	px.Restore() // run revokes its lease on its way out
	r := <-done
	if r.code != ExitSeatLost || !strings.Contains(r.err, "local deadline passed") || !strings.Contains(r.err, "sent SIGKILL") {
		t.Errorf("exit %d, stderr %q; want %d, the local deadline and SIGKILL", r.code, r.err, ExitSeatLost)
	}
}

// TestRunHoldSeesLossAtOnce: etcd goes away just after the grant. hold
// must act on the loss as soon as the session ends: never start the
// command once it has (found by a review, 2026-12-04: it started 50 ms
// after), and stop a started one at once, not after the drain watch's
// first read gave up 5 s later.
func TestRunHoldSeesLossAtOnce(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "session ends while it runs", true: "session ended before it starts"}[late], func(t *testing.T) {
			h := newHarness(t)
			h.createPool("p", coordinator.PoolSpec{Capacity: 2})
			ctx := testkit.Ctx(t, 60*time.Second)
			agent := h.session(30 * time.Second)
			if _, err := h.c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "node-1", Addr: "10.0.0.1:1", Seats: 2}); err != nil {
				t.Fatal(err)
			}
			px := etcdtest.NewProxy(t, h.eps)
			pcli := testkit.Client(t, px.URL())
			pc := testkit.Coordinator(t, pcli)
			dir, inv := t.TempDir(), newInvocation()
			inv.vars["D"] = dir
			sigs := newSignalRouter(inv.env)
			defer sigs.stop()
			o := &runOptions{g: &globalOptions{env: inv.env, sigs: sigs, CommandTimeout: 5 * time.Second}, Pool: "p", KillGrace: 300 * time.Millisecond}
			sess, err := o.newSession(ctx, pcli, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := pc.Claim(ctx, sess, "p", coordinator.WithInstance("node-1"))
			if err != nil {
				t.Fatal(err)
			}
			px.Blackhole()
			cut := time.Now()
			if late {
				<-sess.Done()
			}
			o.Argv = []string{"sh", "-c", `touch "$D/started"; trap 'exit 143' TERM; while :; do sleep 0.05; done`}
			o.path, _ = lookCommand("sh")
			in, _ := cl.Instance()
			err = o.hold(context.Background(), cl, sess, in)
			if !errors.Is(err, errSeatLost) {
				t.Fatalf("hold: %v; want the seat lost", err)
			}
			if late && exists(filepath.Join(dir, "started")) {
				t.Error("the command started although the session had ended")
			}
			if took := time.Since(cut); took > 3*time.Second {
				t.Errorf("hold returned %v after etcd went away; want by the session's deadline (1.5 s) and a short grace", took)
			}
			px.Restore()
		})
	}
}

// TestRunInstanceLossBeforeStartRecordsIt: the instance goes before the
// command starts; hold does not start it, and releases the seat, which
// records the instance's loss rather than an expiry (the session's
// revoke). Found by a review (2026-12-05): it said expired.
func TestRunInstanceLossBeforeStartRecordsIt(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 2})
	ctx := testkit.Ctx(t, 60*time.Second)
	agent := h.session(30 * time.Second)
	if _, err := h.c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "node-1", Addr: "10.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	events := h.c.Watch(ctx, "p")
	pc := testkit.Coordinator(t, h.cli, coordinator.WithInstanceGoneHold(-1)) // as Run's
	dir, inv := t.TempDir(), newInvocation()
	inv.vars["D"] = dir
	sigs := newSignalRouter(inv.env)
	defer sigs.stop()
	o := &runOptions{g: &globalOptions{env: inv.env, sigs: sigs, CommandTimeout: 5 * time.Second}, Pool: "p", KillGrace: 300 * time.Millisecond}
	sess, err := o.newSession(ctx, h.cli, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := pc.Claim(ctx, sess, "p", coordinator.WithInstance("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	done := cl.Done()
	if err := h.c.DeregisterInstance(ctx, "p", "node-1"); err != nil {
		t.Fatal(err)
	}
	<-done
	o.Argv = []string{"sh", "-c", `touch "$D/started"`}
	o.path, _ = lookCommand("sh")
	in, _ := cl.Instance()
	err = o.hold(context.Background(), cl, sess, in)
	o.closeSession(sess) // as Run's defer
	if !errors.Is(err, errSeatLost) || exists(filepath.Join(dir, "started")) {
		t.Fatalf("hold: %v, started %v; want the seat lost and the command not started", err, exists(filepath.Join(dir, "started")))
	}
	for ev := range events {
		if ev.Seat >= 0 && ev.Type != coordinator.EventSeatClaimed {
			if ev.LossReason() != coordinator.ReasonInstanceGone {
				t.Fatalf("the seat's end: event %s, loss reason %q; want %q", ev.Type, ev.LossReason(), coordinator.ReasonInstanceGone)
			}
			return
		}
	}
}

// TestRunLeftoverStoppedWithSeat: the command exits, leaving a child that
// ignores SIGTERM, and run gives it --kill-grace before releasing the
// seat. Meanwhile the seat is freed on the server (the lease revoked, or
// the seat key deleted by hand), and a waiter is granted it at once: the
// leftover must be killed then, not at the end of --kill-grace. Found by a
// review (2026-12-05): that wait heeded only the session, which learns of
// a revoked lease at its next keepalive and of a deleted seat key never,
// and the leftover ran on for 9.6 s of the 10 s grace while another held
// the seat.
func TestRunLeftoverStoppedWithSeat(t *testing.T) {
	for _, how := range []string{"lease revoked", "seat key deleted"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t)
			h.createPool("p", coordinator.PoolSpec{Capacity: 1})
			dir, inv := t.TempDir(), newInvocation()
			script := `echo $$ > "$D/leader"; sh -c 'exec 2>"$D/stderr"; trap "touch \"$D/term\"" TERM; echo $$ > "$D/pid"; while :; do sleep 0.05; done' & while [ ! -s "$D/pid" ]; do sleep 0.01; done; exit 0`
			wait := h.runChild(t, inv, dir, []string{"p", "--holder", "h", "--ttl", "30s"}, script)
			leader, child := readPid(t, filepath.Join(dir, "leader")), readPid(t, filepath.Join(dir, "pid"))
			s := h.heldBy(t, "p", "h")
			testkit.Eventually(t, 5*time.Second, "the command to exit", func() bool { return testkit.PidGone(leader) })
			waitFile(t, filepath.Join(dir, "term")) // run sent the leftover SIGTERM: its --kill-grace (10 s) runs
			ctx := testkit.Ctx(t, 30*time.Second)
			if how == "lease revoked" {
				etcdtest.Revoke(t, h.cli, s.Lease)
			} else if _, err := h.cli.Delete(ctx, h.c.Prefix()+"/pools/p/seats/", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
			other, err := h.c.Claim(ctx, h.session(10*time.Second), "p", coordinator.WithWait())
			if err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 2*time.Second, fmt.Sprintf("the leftover (pid %d) killed once the seat went to token %d", child, other.Token()), func() bool {
				return testkit.PidGone(child)
			})
			wait().want(t, ExitSeatLost)
		})
	}
}
