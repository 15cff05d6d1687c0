package coordinator

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRecordsEncodeAsJSON: the hand-written encoders give, byte for byte,
// what json.Marshal gives, over strings that need no escaping and strings
// that do (quotes, control bytes, HTML characters, non-ASCII, invalid
// UTF-8), and over the fields that are omitted when empty.
func TestRecordsEncodeAsJSON(t *testing.T) {
	alphabet := []string{"a", "Z", "0", "/", "-", " ", "\"", "\\", "<", ">", "&", "\n", "\x00", "\x7f", "é", "日", "\xff", "\u2028"}
	str := func(r *rand.Rand) string {
		var b bytes.Buffer
		for range r.IntN(12) {
			if r.IntN(3) > 0 {
				b.WriteString(alphabet[r.IntN(5)]) // mostly plain
			} else {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
		}
		return b.String()
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		at := time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).UTC()
		if i%7 == 0 {
			at = at.Truncate(time.Second) // RFC3339Nano drops a zero fraction
		}
		seat := seatRecord{Holder: str(r), Tenant: str(r), Instance: str(r), Nonce: r.Uint64(), ClaimedAt: at,
			TenantSlot: r.IntN(5) - 1, BindSlot: r.IntN(1_000_001) - 1}
		rel := releaseRecord{Token: r.Int64(), Forced: r.IntN(2) == 0, Reason: str(r), By: str(r), At: at}
		for _, c := range []struct {
			v   any
			got []byte
		}{{seat, seat.encode()}, {rel, rel.encode()}} {
			want, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.got, want) {
				t.Fatalf("%+v:\n got %s\nwant %s", c.v, c.got, want)
			}
		}
	}
}

// TestRecordsDecodeAsJSON: decodeSeatRecord and decodeWaiterRecord return
// what json.Unmarshal returns (with a seat's absent slots read as -1), and
// fail where it fails, over records encode wrote, the same with bytes
// changed, inserted or cut, and records in other forms (fields reordered,
// escapes, spaces, fields missing). Encoded records with plain names must
// take the hand-written path.
func TestRecordsDecodeAsJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	want := func(b []byte) (seatRecord, error) {
		rec := seatRecord{TenantSlot: -1, BindSlot: -1}
		err := json.Unmarshal(b, &rec)
		return rec, err
	}
	same := func(a, b seatRecord) bool {
		return a.Holder == b.Holder && a.Tenant == b.Tenant && a.Instance == b.Instance && a.Nonce == b.Nonce &&
			a.ClaimedAt.Equal(b.ClaimedAt) && a.ClaimedAt.Location().String() == b.ClaimedAt.Location().String() &&
			a.TenantSlot == b.TenantSlot && a.BindSlot == b.BindSlot
	}
	check := func(b []byte) {
		t.Helper()
		got, gerr := decodeSeatRecord(b)
		exp, werr := want(b)
		if (gerr == nil) != (werr == nil) || (werr == nil && !same(got, exp)) {
			t.Fatalf("%q:\n got %+v, %v\nwant %+v, %v", b, got, gerr, exp, werr)
		}
	}
	names := []string{"", "a", "vm/123", "acme", "x<y", `q"uote`, "é", "\xff", "tab\t"}
	plain := func(s string) bool { return s == "" || s == "a" || s == "vm/123" || s == "acme" }
	fast := 0
	for i := range 5000 {
		rec := seatRecord{Holder: names[r.IntN(len(names))], Tenant: names[r.IntN(len(names))], Instance: names[r.IntN(len(names))],
			Nonce: r.Uint64(), ClaimedAt: time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).UTC(), TenantSlot: r.IntN(5) - 1, BindSlot: r.IntN(100) - 1}
		if i%5 == 0 {
			rec.ClaimedAt = rec.ClaimedAt.Truncate(time.Second)
		}
		b := rec.encode()
		if _, ok := scanSeatRecord(b); ok {
			fast++
		} else if plain(rec.Holder) && plain(rec.Tenant) && plain(rec.Instance) {
			t.Fatalf("%s did not take the hand-written path", b)
		}
		check(b)
		m := bytes.Clone(b)
		switch j := r.IntN(len(m)); r.IntN(3) {
		case 0:
			m[j] = "\"\\{}:,0-9aZ \x00\xff"[r.IntN(14)]
		case 1:
			m = append(m[:j:j], append([]byte{" ,\"0"[r.IntN(4)]}, m[j:]...)...)
		default:
			m = m[:j]
		}
		check(m)
	}
	if fast < 500 {
		t.Fatalf("only %d of 5000 encoded records took the hand-written path", fast)
	}
	checkWaiter := func(b []byte) {
		t.Helper()
		got, gerr := decodeWaiterRecord(b)
		var exp waiterRecord
		werr := json.Unmarshal(b, &exp)
		if (gerr == nil) != (werr == nil) || (werr == nil && (got.Holder != exp.Holder || got.Tenant != exp.Tenant ||
			got.Instance != exp.Instance || !maps.Equal(got.Labels, exp.Labels) || !got.Since.Equal(exp.Since) ||
			got.Since.Location().String() != exp.Since.Location().String())) {
			t.Fatalf("%q:\n got %+v, %v\nwant %+v, %v", b, got, gerr, exp, werr)
		}
	}
	for i := range 5000 {
		rec := waiterRecord{Holder: names[r.IntN(len(names))], Tenant: names[r.IntN(len(names))], Instance: names[r.IntN(len(names))],
			Since: time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).UTC()}
		if i%5 == 0 {
			rec.Labels = map[string]string{names[r.IntN(len(names))]: names[r.IntN(len(names))], "zone": "a"}
		}
		b := rec.encode()
		if want, _ := json.Marshal(rec); !bytes.Equal(b, want) {
			t.Fatalf("%+v:\n got %s\nwant %s", rec, b, want)
		}
		checkWaiter(b)
		m := bytes.Clone(b)
		j := r.IntN(len(m))
		m[j] = "\"\\{}:,0-9aZ \x00\xff"[r.IntN(14)]
		checkWaiter(m)
		checkWaiter(b[:j])
	}
	for _, b := range []string{
		`{"holder":"h","nonce":1,"claimedAt":"2026-01-02T03:04:05Z"}`,
		`{"nonce":1,"holder":"h","claimedAt":"2026-01-02T03:04:05Z","tenantSlot":2,"bindSlot":3}`,
		`{"holder":"h\u0041","nonce":1,"claimedAt":"2026-01-02T03:04:05Z","tenantSlot":2,"bindSlot":3}`,
		`{"holder":"h", "nonce":1,"claimedAt":"2026-01-02T03:04:05Z","tenantSlot":2,"bindSlot":3}`,
		`{"holder":"h","nonce":1,"claimedAt":"2026-01-02T03:04:05+01:00","tenantSlot":2,"bindSlot":3}`,
		`{"holder":"h","nonce":01,"claimedAt":"2026-01-02T03:04:05Z","tenantSlot":2,"bindSlot":3}`,
		`{"holder":"h","nonce":1,"claimedAt":"2026-01-02T03:04:05Z","tenantSlot":2,"bindSlot":3}x`,
		`not json`, ``,
	} {
		check([]byte(b))
	}
}
