package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestEscape(t *testing.T) {
	tests := map[string]string{
		"plain":             "plain",
		"gpu-0 ✓":           "gpu-0 ✓",
		"a\x1b[2Jb":         `a\x1b[2Jb`,
		"tab\there":         `tab\x09here`,
		"new\nline":         `new\x0aline`,
		"bidi\u202eevil":    `bidi\u202eevil`,
		"bad utf8 \xff end": `bad utf8 \xff end`,
		"c1 \u0085":         `c1 \x85`,
	}
	for in, want := range tests {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHostileHolderRendered gives a seat a holder full of terminal
// escapes (poolctl and the library refuse such a holder, but any client
// with write access can put one in etcd) and checks that seats prints it
// escaped.
func TestHostileHolderRendered(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 1})
	hostileSeat(t, h, "p", "evil\x1b]0;pwned\x07\x1b[2J")
	r := h.run("seats", "p")
	r.want(t, ExitOK)
	if strings.ContainsAny(r.out, "\x1b\x07") || !strings.Contains(r.out, `evil\x1b]0;pwned\x07\x1b[2J`) {
		t.Errorf("seats output is not escaped:\n%q", r.out)
	}
}

// hostileSeat claims pool's one seat, then rewrites its record in etcd with
// holder, as another client could: raw, whatever it holds.
func hostileSeat(t *testing.T, h *harness, pool, holder string) {
	t.Helper()
	h.claim(pool, coordinator.WithHolder("x"))
	ctx := testkit.Ctx(t, 10*time.Second)
	resp, err := h.cli.Get(ctx, h.c.Prefix()+"/pools/"+pool+"/seats/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("seat key: %v, %d keys", err, len(resp.Kvs))
	}
	var rec map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		t.Fatal(err)
	}
	rec["holder"] = holder
	val, _ := json.Marshal(rec) // leaves DEL, C1 and the bidi overrides raw
	if _, err := h.cli.Put(ctx, string(resp.Kvs[0].Key), string(val), clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
}
