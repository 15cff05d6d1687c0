//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestRunDrainNotice drains the instance of a running command's seat: the
// command gets --drain-signal and finds $ETCDPOOL_DRAIN_FILE, which goes
// away when the instance is undrained; the command keeps its seat.
func TestRunDrainNotice(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 2})
	agent := h.session(10 * time.Second)
	if _, err := h.c.RegisterInstance(testkit.Ctx(t, 5*time.Second), "p", agent.Lease(), coordinator.Instance{ID: "node-1", Seats: 2}); err != nil {
		t.Fatal(err)
	}
	dir, inv := t.TempDir(), newInvocation()
	script := `exec 2>/dev/null
echo "$ETCDPOOL_DRAIN_FILE" > "$D/path"
trap '[ -e "$ETCDPOOL_DRAIN_FILE" ] && echo seen >> "$D/usr1"' USR1
touch "$D/ready"
while [ ! -e "$D/stop" ]; do sleep 0.05; done`
	wait := h.runChild(t, inv, dir, []string{"p", "--instance", "node-1", "--holder", "drained", "--drain-signal", "usr1"}, script)
	waitFile(t, filepath.Join(dir, "ready"))
	b, _ := os.ReadFile(filepath.Join(dir, "path"))
	file := strings.TrimSpace(string(b))
	if file == "" || exists(file) {
		t.Fatalf("ETCDPOOL_DRAIN_FILE %q: want a path that does not exist yet", file)
	}
	h.run("drain", "p", "node-1").want(t, ExitOK)
	waitFile(t, filepath.Join(dir, "usr1"))
	if !exists(file) {
		t.Error("the drain file is missing while the instance drains")
	}
	h.run("undrain", "p", "node-1").want(t, ExitOK)
	testkit.Eventually(t, 10*time.Second, "drain file removed after undrain", func() bool { return !exists(file) })
	h.heldBy(t, "p", "drained") // still held
	touch(t, filepath.Join(dir, "stop"))
	wait().want(t, ExitOK)
	if exists(filepath.Dir(file)) {
		t.Error("the drain file's directory outlived run")
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
