package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestRunSidecarFlagNames checks that run takes the sidecar's names for
// the same settings: --labels k=v,k2=v2 and --wait-timeout.
func TestRunSidecarFlagNames(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 2})
	agent := h.session(10 * time.Second)
	if _, err := h.c.RegisterInstance(testkit.Ctx(t, 5*time.Second), "p", agent.Lease(),
		coordinator.Instance{ID: "i0", Labels: map[string]string{"zone": "a", "kind": "x"}}); err != nil {
		t.Fatal(err)
	}
	r := h.run("run", "p", "--labels", "zone=a,kind=x", "--wait-timeout", "5s", "--", "sh", "-c", "echo $ETCDPOOL_INSTANCE")
	r.want(t, ExitOK)
	if strings.TrimSpace(r.out) != "i0" {
		t.Errorf("bound to %q, want i0", r.out)
	}
	h.run("run", "p", "--labels", "zone=b", "--wait-timeout", "300ms", "--", "true").want(t, ExitTimeout)
	h.run("run", "p", "--labels", "zone", "--", "true").want(t, ExitUsage)
}
