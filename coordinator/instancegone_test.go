package coordinator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// goneInstance sets up an exclusive instance bot-1 registered by an agent,
// a claim bound to it whose Done is watched, and then ends the agent's
// lease as etcd does when the agent is cut off past its TTL. It returns
// the claim once its Done has closed with ErrInstanceGone, and the time it
// saw that.
func goneInstance(t *testing.T, ctx context.Context, c *coordinator.Coordinator, ttl time.Duration) (*coordinator.Claim, time.Time) {
	t.Helper()
	cli := c.Client()
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4})
	agent := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "bot-1", Addr: "10.0.0.1:80"}); err != nil {
		t.Fatal(err)
	}
	s := testkit.Session(t, cli, ttl)
	first := mustClaim(t, ctx, c, s, "p", coordinator.WithInstance("bot-1"))
	done := first.Done()
	if _, err := cli.Revoke(ctx, agent.Lease()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Done did not close after the instance went")
	}
	told := time.Now()
	if !errors.Is(first.Err(), coordinator.ErrInstanceGone) {
		t.Fatalf("Err = %v, want ErrInstanceGone", first.Err())
	}
	return first, told
}

// reRegister registers bot-1 again under a new agent lease, as its agent
// does once back, and starts a claim bound to it from another process,
// waiting. It returns the time that claim was granted.
func reRegister(t *testing.T, ctx context.Context, c *coordinator.Coordinator) <-chan time.Time {
	t.Helper()
	cli := c.Client()
	agent := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "bot-1", Addr: "10.0.0.1:80"}); err != nil {
		t.Fatal(err)
	}
	other := testkit.Coordinator(t, newClient(t, cli.Endpoints()...), coordinator.WithPrefix(c.Prefix()))
	s := testkit.Session(t, other.Client(), 10*time.Second)
	granted := make(chan time.Time, 1)
	go func() {
		if _, err := other.Claim(ctx, s, "p", coordinator.WithInstance("bot-1"), coordinator.WithWait()); err != nil {
			t.Error(err)
			return
		}
		granted <- time.Now()
	}()
	return granted
}

// An instance whose agent was cut off from etcd past its lease, and came
// back, is not bound to anyone else while its first holder, told by Done,
// may still be stopping: not within the hold (WithInstanceGoneHold). The
// seat is then freed, and the waiter granted.
func TestGoneInstanceNotReboundWithinHold(t *testing.T) {
	const hold = 1500 * time.Millisecond
	c, _ := newCoord(t, coordinator.WithInstanceGoneHold(hold))
	ctx := testkit.Ctx(t, 30*time.Second)
	_, told := goneInstance(t, ctx, c, 10*time.Second)
	granted := reRegister(t, ctx, c)
	select {
	case at := <-granted:
		// The hold starts as Done closes, a moment before the test sees it.
		if after := at.Sub(told); after < hold-100*time.Millisecond {
			t.Fatalf("bot-1 bound again %v after its first holder was told, within the hold of %v", after, hold)
		}
		t.Logf("bound again %v after the first holder was told (hold %v)", at.Sub(told), hold)
	case <-time.After(hold + 5*time.Second):
		t.Fatalf("the waiter was not granted within %v of the hold's end", 5*time.Second)
	}
}

// A holder that releases after its instance went frees the seat at once:
// the waiter does not wait for the hold.
func TestGoneInstanceReleasedWithinHold(t *testing.T) {
	const hold = time.Minute
	c, _ := newCoord(t, coordinator.WithInstanceGoneHold(hold))
	ctx := testkit.Ctx(t, 30*time.Second)
	first, _ := goneInstance(t, ctx, c, 10*time.Second)
	granted := reRegister(t, ctx, c)
	testkit.Eventually(t, 5*time.Second, "the waiter in line", func() bool {
		q, err := c.Queue(ctx, "p")
		return err == nil && len(q) == 1
	})
	released := time.Now()
	if err := first.Release(ctx); err != nil {
		t.Fatalf("release within the hold: %v", err)
	}
	select {
	case at := <-granted:
		t.Logf("granted %v after the release", at.Sub(released))
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not granted after the first holder released")
	}
}

// The default hold is the session's TTL; a negative one lasts until the
// holder releases.
func TestGoneInstanceHoldDefaults(t *testing.T) {
	ttl := coordinator.MinTTL
	held := func(c *coordinator.Coordinator) bool {
		st, err := c.PoolStatus(context.Background(), "p")
		if err != nil {
			t.Fatal(err)
		}
		return st.Held == 1
	}
	t.Run("session TTL", func(t *testing.T) {
		c, _ := newCoord(t)
		ctx := testkit.Ctx(t, 30*time.Second)
		_, told := goneInstance(t, ctx, c, ttl)
		time.Sleep(ttl - 500*time.Millisecond - time.Since(told))
		if !held(c) {
			t.Fatalf("seat freed within %v of Done, before the session's TTL (%v)", time.Since(told), ttl)
		}
		testkit.Eventually(t, 3*time.Second, "the seat freed after the TTL", func() bool { return !held(c) })
	})
	t.Run("until released", func(t *testing.T) {
		c, _ := newCoord(t, coordinator.WithInstanceGoneHold(-1))
		ctx := testkit.Ctx(t, 30*time.Second)
		first, _ := goneInstance(t, ctx, c, ttl)
		time.Sleep(ttl + time.Second)
		if !held(c) {
			t.Fatal("seat freed without a release, the hold being negative")
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if held(c) {
			t.Fatal("seat still held after its release")
		}
	})
}

// When the seat goes in the same revision as its instance (one lease bound
// both, and it ended), the claim ends with the lease's end, not
// ErrInstanceGone, which says the seat is still held for the hold. Found
// by a review (2026-12-05): it said ErrInstanceGone, and poolctl run gave
// its command --kill-grace on a seat already free.
func TestSeatGoneWithInstanceSaysExpired(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	s := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", s.Lease(), coordinator.Instance{ID: "bot-1"}); err != nil {
		t.Fatal(err)
	}
	cl := mustClaim(t, ctx, c, s, "p", coordinator.WithInstance("bot-1"))
	done := cl.Done()
	if _, err := cli.Revoke(ctx, s.Lease()); err != nil {
		t.Fatal(err)
	}
	<-done
	if !errors.Is(cl.Err(), coordinator.ErrSessionExpired) {
		t.Fatalf("Err = %v, want ErrSessionExpired: the seat went with the lease", cl.Err())
	}
}

// A holder that releases after its instance went records the instance's
// loss, so the pool's events count it as such (not a plain release); the
// hold then ends with the release.
func TestReleaseAfterInstanceGoneSaysSo(t *testing.T) {
	c, _ := newCoord(t, coordinator.WithInstanceGoneHold(time.Minute))
	ctx := testkit.Ctx(t, 30*time.Second)
	events := c.Watch(ctx, "p")
	first, _ := goneInstance(t, ctx, c, 10*time.Second)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		if ev.Type == coordinator.EventSeatReleased || ev.Type == coordinator.EventSeatExpired {
			if ev.LossReason() != coordinator.ReasonInstanceGone {
				t.Fatalf("event %s reason %q: LossReason %q, want %q", ev.Type, ev.Reason, ev.LossReason(), coordinator.ReasonInstanceGone)
			}
			return
		}
	}
	t.Fatal("no release event")
}

// A claim whose instance was deregistered and registered again after the
// grant has lost its instance, even when the monitor starts after the
// history between is compacted: it then reads the key, which is there,
// but created after the grant. Found by a review (2026-12-05): the
// monitor took the new registration for the seat's own instance, and
// Done never closed; without the compaction it did.
func TestReregisteredInstanceGoneAfterCompaction(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(map[bool]string{false: "replayed", true: "compacted"}[compact], func(t *testing.T) {
			ctx, c, _, cl := claimOnInstance(t)
			cli := c.Client()
			if err := c.DeregisterInstance(ctx, "p", "i1"); err != nil {
				t.Fatal(err)
			}
			agent := testkit.Session(t, cli, 10*time.Second)
			if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1"}); err != nil {
				t.Fatal(err)
			}
			if compact {
				resp, err := cli.Put(ctx, c.Prefix()+"/bump", "x")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-cl.Done(): // the first call starts the monitor
				if !errors.Is(cl.Err(), coordinator.ErrInstanceGone) {
					t.Fatalf("Done: %v; want ErrInstanceGone", cl.Err())
				}
			case <-time.After(3 * time.Second):
				t.Fatalf("Done still open 3s after the monitor started; instance i1 was registered again after the grant (token %d)", cl.Token())
			}
		})
	}
}
