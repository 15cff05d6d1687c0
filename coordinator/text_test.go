package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestInvalidUTF8Refused: text that a record stores (a holder's name, a
// label, a force-release's reason and author) must be valid UTF-8, and is
// refused at once with ErrInvalid naming it. JSON stores each bad byte as
// U+FFFD, so the record read back is not the one written. Found by a
// review (2026-12-05): a holder of 100 such bytes (300 once stored, over
// MaxHolderLen) made readers take the waiter's own queue key for a foreign
// key, and the waiter ended with a false "seat lost"; an instance's label
// never matched the selector it was registered with; a retried release
// did not recognise its own record.
func TestInvalidUTF8Refused(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2})
	s := testkit.Session(t, cli, 30*time.Second)
	bad := "eu-\xff"
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, coordinator.ErrInvalid) || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%s: %v; want ErrInvalid saying it is not UTF-8", what, err)
		}
	}
	_, err := c.Claim(ctx, s, "p", coordinator.WithHolder(strings.Repeat("\xff", 100)))
	refused("holder", err)
	_, err = c.Claim(ctx, s, "p", coordinator.WithLabels(map[string]string{"zone": bad}))
	refused("label value", err)
	_, err = c.Claim(ctx, s, "p", coordinator.WithLabels(map[string]string{bad: "a"}))
	refused("label key", err)
	_, err = c.RegisterInstance(ctx, "p", s.Lease(), coordinator.Instance{ID: "w0", Labels: map[string]string{"zone": bad}})
	refused("instance label", err)

	cl := mustClaim(t, ctx, c, s, "p")
	_, err = c.ForceRelease(ctx, "p", cl.Seat(), cl.Token(), "drain "+bad)
	refused("force-release reason", err)
	refused("force-release author", cl.ForceReleaseBy(ctx, "drain", "ops-\xff"))
	refused("force-release-by reason", cl.ForceReleaseBy(context.Background(), bad, "ops"))
	refused("release author", cl.ReleaseBy(ctx, "ops-\xff"))
	if cl.Err() != nil {
		t.Errorf("the seat went with a refused call: %v", cl.Err())
	}
}
