package cli

import (
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// -o wide is the table with more columns, appended after the usual ones
// (kubectl's rule), so a script that cuts the first columns reads both.
// The extra columns come from pure builders, one per command, that take
// the same data the table was built from.

// wide reports whether -o wide was asked for.
func (g *globalOptions) wide() bool { return g.Output == "wide" }

// widen appends extra columns to a table. extra has one row per row.
func widen(header []string, rows [][]string, extraHeader []string, extra [][]string) ([]string, [][]string) {
	h := append(append([]string{}, header...), extraHeader...)
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = append(append([]string{}, r...), extra[i]...)
	}
	return h, out
}

// withWide returns r with the extra columns appended when -o wide is set.
func (g *globalOptions) withWide(r Result, extraHeader []string, extra [][]string) Result {
	if g.wide() && r.Header != nil {
		r.Header, r.Rows = widen(r.Header, r.Rows, extraHeader, extra)
	}
	return r
}

// statusWide is status's wide columns: each pool's spec and its revision.
func statusWide(pools []coordinator.PoolStatus) (header []string, rows [][]string) {
	header = []string{"SEAT-TTL", "TENANT-LIMIT", "REQUIRE-INSTANCE", "SPEC-REVISION"}
	for _, p := range pools {
		ttl, limit, req := p.Spec.SeatTTL().String(), limitCell(p.Spec.TenantLimit), yesNo(p.Spec.RequireInstance)
		if p.SpecError != "" {
			ttl, limit, req = "?", "?", "?"
		}
		rows = append(rows, []string{ttl, limit, req, itoa64(p.Revision)})
	}
	return header, rows
}

// seatsWide is seats' wide columns: the lease, when the seat was claimed
// (the holder's clock), and the address of the instance it is bound to.
func seatsWide(v seatListView, addrs map[string]string) (header []string, rows [][]string) {
	header = []string{"LEASE", "CLAIMED-AT", "INSTANCE-ADDR"}
	for _, s := range v.Seats {
		rows = append(rows, []string{s.Lease, timeCell(s.ClaimedAt), dash(addrs[s.Instance])})
	}
	return header, rows
}

// queueWide is queue's wide columns: the waiter's lease, when it joined
// (its own clock), and its queue key's create revision, which orders the
// queue.
func queueWide(v queueView, ws []coordinator.Waiter) (header []string, rows [][]string) {
	header = []string{"LEASE", "SINCE", "QUEUE-REVISION"}
	for i, w := range v.Waiters {
		rows = append(rows, []string{w.Lease, timeCell(w.Since), itoa64(ws[i].Revision)})
	}
	return header, rows
}

// instancesWide is instances' wide columns: the agent's lease and the
// instance key's revision.
func instancesWide(ins []coordinator.Instance) (header []string, rows [][]string) {
	header = []string{"LEASE", "REVISION"}
	for _, in := range ins {
		rows = append(rows, []string{leaseHex(in.Lease), itoa64(in.Revision)})
	}
	return header, rows
}

// timeCell renders a stored timestamp in RFC 3339, UTC, to the second.
func timeCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
