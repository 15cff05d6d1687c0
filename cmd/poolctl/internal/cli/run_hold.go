package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// guardDied is the exit code of a command whose guard process died before
// reporting it: the command was killed with it.
const guardDied = -1

// hold runs the command while the claim holds its seat. It returns the
// command's exit status, or errSeatLost after stopping the command when the
// seat went first. ctx does not bound the command: a signal that cancelled
// it between the grant and the handover to the command is forwarded like
// any later one.
func (o *runOptions) hold(ctx context.Context, cl *coordinator.Claim, sess *coordinator.Session, in coordinator.Instance) error {
	env := o.g.env
	lost := cl.Done() // the claim is watched from here on
	drain, err := o.newDrainNotice(in)
	if err != nil {
		o.release(cl)
		return fmt.Errorf("drain file: %w", err)
	}
	defer drain.stop()
	select { // the command never runs without a seat
	case <-lost:
		return o.lost(cl, sess, cl.Err(), "the command was not started")
	case <-sess.Done(): // the claim learns it a moment later
		return o.lost(cl, sess, sess.Err(), "the command was not started")
	default:
	}
	if !time.Now().Before(sess.Deadline()) { // its watchdog has not run yet
		return o.lost(cl, sess, errLocalDeadlinePassed, "the command was not started")
	}
	childEnv := o.childEnv(cl, in, drain.file)
	grp, err := startGroup(o.path, o.Argv, childEnv, env.In, env.Out, env.ErrOut, deadlineOf(sess, o.KillGrace))
	if errors.Is(err, errPastDeadline) && time.Now().Before(sess.Deadline()) {
		// A keepalive moved the deadline as the guard started: once more.
		grp, err = startGroup(o.path, o.Argv, childEnv, env.In, env.Out, env.ErrOut, deadlineOf(sess, o.KillGrace))
	}
	if err != nil && (errors.Is(err, errPastDeadline) || !time.Now().Before(sess.Deadline())) {
		// poolctl was stopped, or its watchdog late, meanwhile.
		return o.lost(cl, sess, errLocalDeadlinePassed, "the command was not started")
	}
	if err != nil {
		o.release(cl)
		return startError(o.Argv[0], err)
	}
	defer grp.close()
	defer o.deadlines.follow(grp, sess, o.KillGrace)()
	defer o.refuseSuspend()()
	o.logf("started %s (%s)", o.Argv[0], grp.describe())
	restore := o.g.sigs.take(grp.signal)
	defer restore()
	var early interruptError
	if errors.As(context.Cause(ctx), &early) {
		grp.signal(early.sig)
	}
	drain.start(cl, grp)
	late := stoppedPastDeadline(sess)
	select {
	case <-grp.exited:
		how, byGuard := o.stopTree(grp, cl, sess, o.KillGrace, late) // whatever the command left running
		if byGuard {
			return o.expired(cl, sess, how)
		}
		if lost := cl.Err(); lost != nil {
			return o.lost(cl, sess, lost, "the command exited meanwhile")
		}
		if !grp.gone() {
			o.logf("warning: the command exited, but what it left running outlived SIGKILL (%s); releasing the seat all the same", how)
		}
		o.release(cl)
		if grp.exitCode() == guardDied {
			return errors.New("the command's guard process died, and the command with it")
		}
		if code := grp.exitCode(); code != 0 {
			return exitStatus{code: code}
		}
		return nil
	case <-lost:
		why := cl.Err()
		how, _ := o.stopTree(grp, cl, sess, lossGrace(why, sess, o.KillGrace), late)
		return o.lost(cl, sess, why, how)
	}
}

// stopTree stops what is left of the command's tree, SIGKILL after grace
// (stop), and says how; unless the guard stops it at the session's
// deadline, before that stop or during its grace: then it waits for the
// guard, says how the guard did it (guardStopped), and reports byGuard.
func (o *runOptions) stopTree(grp *group, cl *coordinator.Claim, sess *coordinator.Session, grace time.Duration, late func() bool) (how string, byGuard bool) {
	if !grp.expiredAtDeadline() {
		how = grp.stop(grace, lossCut(cl, sess, o.KillGrace))
	}
	if grp.expiredAtDeadline() {
		return o.guardStopped(grp, sess, late), true
	}
	return how, false
}

// guardStopped waits for the tree that the guard stops at the session's
// deadline (guard_linux.go), which has SIGKILL sent grace after it at the
// latest, and says what happened: that poolctl was stopped or hung, when
// it noticed its session's end well past the deadline (late); else its
// watchdog fired at the deadline, as when etcd is only cut off, and the
// guard merely came first (found by a review, 2026-12-05: such a run was
// said to have been stopped).
func (o *runOptions) guardStopped(grp *group, sess *coordinator.Session, late func() bool) string {
	grace := deadlineOf(sess, o.KillGrace).grace
	gone := grp.waitGone(time.Now().Add(grace+killWait), nil) // the guard's SIGKILL is due by then
	var b strings.Builder
	if late() {
		b.WriteString("poolctl extended its session by no keepalive before the deadline (it was stopped or hung), so ")
	}
	b.WriteString("its guard sent SIGTERM to the command's tree at the session's deadline")
	if grp.killedAtDeadline() {
		fmt.Fprintf(&b, ", and then sent SIGKILL (by %v after it)", grace)
	}
	if !gone {
		grp.kill()
		fmt.Fprintf(&b, "; part of it still ran %v after the deadline", time.Since(sess.Deadline()).Round(time.Millisecond))
	}
	return b.String()
}

// expired reports a command that the guard stopped at the session's
// deadline. The session ends at once, its deadline passed, and the seat
// with it; unless poolctl moved the deadline just before and told the
// guard too late (a keepalive answered at the last moment): the seat is
// then still held, and is released.
func (o *runOptions) expired(cl *coordinator.Claim, sess *coordinator.Session, how string) error {
	if !time.Now().Before(sess.Deadline()) {
		select {
		case <-cl.Done(): // the session's watchdog ends it, and the claim
		case <-time.After(sess.Margin()):
		}
	}
	if why := cl.Err(); why != nil {
		return o.lost(cl, sess, why, how)
	}
	o.release(cl)
	return fmt.Errorf("the command's guard stopped it at the session's deadline, which poolctl extended too late to tell it (%s); the seat was released", how)
}

// lossCut sends the grace that each loss leaves a command whose grace
// relied on the seat staying held: lossGrace of the claim's loss once its
// Done closes (the seat freed on the server: none), then of the session's
// end (half the margin past a local deadline, none past the lease's end);
// nothing while both live. It is for stop, which shortens its grace to the
// least. So what a command that exited left running is stopped by the
// seat's loss too, not by the session's alone, which learns of a revoked
// lease only at its next keepalive and never of a seat key deleted by hand
// (TestRunLeftoverStoppedWithSeat). It ends with the session, which run
// closes as it returns.
func lossCut(cl *coordinator.Claim, sess *coordinator.Session, grace time.Duration) <-chan time.Duration {
	cut := make(chan time.Duration, 2)
	go func() {
		defer close(cut)
		for lost, ended := cl.Done(), sess.Done(); lost != nil || ended != nil; {
			select {
			case <-lost:
				lost = nil
				cut <- lossGrace(cl.Err(), sess, grace)
			case <-ended:
				ended = nil
				cut <- lossGrace(sess.Err(), sess, grace)
			}
		}
	}()
	return cut
}

// lossGrace is how long a command whose seat was lost (why) gets between
// SIGTERM and SIGKILL. An operator who force-released the seat, released
// it through another holder's handle or deleted the pool chose to end it:
// the command gets grace (--kill-grace), and what it writes meanwhile is
// for its token to fence (README, What fencing does not cover). After its
// instance went, the seat and the instance's slot stay held until run
// closes its session, once the command is gone (WithInstanceGoneHold(-1)
// in Run): grace as well (TestRunInstanceGoneHoldsSeatUntilCommandEnds).
// Else the command must be gone before the seat can be granted to anyone
// else. After its session's local deadline passed (etcd unreachable), the
// lease outlives the deadline by at least the session's margin, and the
// command gets half of that, if grace is not shorter
// (TestRunLossGraceInMargin). After the lease's end on the server, or a
// loss of unknown cause, the seat is free at once: none (TestRunSeatLost).
func lossGrace(why error, sess *coordinator.Session, grace time.Duration) time.Duration {
	switch {
	case errors.Is(why, coordinator.ErrForceReleased), errors.Is(why, coordinator.ErrReleased), errors.Is(why, coordinator.ErrPoolDeleted),
		errors.Is(why, coordinator.ErrInstanceGone):
		return grace
	case errors.Is(why, coordinator.ErrLocalDeadline):
		return min(grace, sess.Margin()/2)
	}
	return 0
}

// lost reports a seat lost while the command ran, or before it started.
// A seat whose instance went is still held (WithInstanceGoneHold(-1) in
// Run), the command being gone: it is released, which records the
// instance's loss, rather than left to the session's revoke, which would
// read as an expiry.
func (o *runOptions) lost(cl *coordinator.Claim, sess *coordinator.Session, why error, how string) error {
	if errors.Is(why, coordinator.ErrInstanceGone) && sess.Err() == nil && time.Now().Before(sess.Deadline()) {
		o.release(cl)
	}
	if errors.Is(why, coordinator.ErrReleased) {
		why = errors.New("released by someone else")
	}
	return classify(errSeatLost, fmt.Errorf("lost seat %d of pool %q (token %d): %s; %s",
		cl.Seat(), cl.Pool(), cl.Token(), Message(why), how))
}

// childEnv is the command's environment: ours without ETCDPOOL_PASSWORD
// and stale ETCDPOOL_ seat variables, plus the seat's.
func (o *runOptions) childEnv(cl *coordinator.Claim, in coordinator.Instance, drainFile string) []string {
	seatVars := []string{
		"ETCDPOOL_POOL=" + cl.Pool(),
		"ETCDPOOL_SEAT=" + strconv.Itoa(cl.Seat()),
		"ETCDPOOL_TOKEN=" + strconv.FormatInt(cl.Token(), 10),
		"ETCDPOOL_INSTANCE=" + in.ID,
		"ETCDPOOL_INSTANCE_ADDR=" + in.Addr,
		drainEnv + "=" + drainFile,
	}
	drop := map[string]bool{"ETCDPOOL_PASSWORD": true}
	for _, kv := range seatVars {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	var out []string
	for _, kv := range o.g.env.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	return append(out, seatVars...)
}
