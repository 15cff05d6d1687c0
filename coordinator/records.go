package coordinator

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The seat, release and waiter records are encoded by hand, and the seat
// and waiter records are decoded by hand when they are in the form encode
// writes. On the path from a Release call to the next holder's grant, the
// release encodes a release record, decodes the next waiter's record and
// encodes its seat record, and the waiter decodes that: encoding/json's
// reflection costs there, on a cold CPU, as much as a tenth of the etcd
// txn in between (BenchmarkReleaseToGrant). The encoders write byte for
// byte what json.Marshal writes, and the decoders return what
// json.Unmarshal returns (TestRecordsEncodeAsJSON,
// TestRecordsDecodeAsJSON).

// encode returns json.Marshal(r).
func (r seatRecord) encode() []byte {
	b := appendNames(make([]byte, 0, 128+len(r.Holder)+len(r.Tenant)+len(r.Instance)), r.Holder, r.Tenant, r.Instance)
	b = append(b, `,"nonce":`...)
	b = strconv.AppendUint(b, r.Nonce, 10)
	b = append(b, `,"claimedAt":`...)
	b = appendJSONTime(b, r.ClaimedAt)
	b = append(b, `,"tenantSlot":`...)
	b = strconv.AppendInt(b, int64(r.TenantSlot), 10)
	b = append(b, `,"bindSlot":`...)
	b = strconv.AppendInt(b, int64(r.BindSlot), 10)
	return append(b, '}')
}

// encode returns json.Marshal(r).
func (r releaseRecord) encode() []byte {
	b := make([]byte, 0, 96+len(r.Reason)+len(r.By))
	b = append(b, `{"token":`...)
	b = strconv.AppendInt(b, r.Token, 10)
	b = append(b, `,"forced":`...)
	b = strconv.AppendBool(b, r.Forced)
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, r.Reason)
	}
	if r.By != "" {
		b = append(b, `,"by":`...)
		b = appendJSONString(b, r.By)
	}
	b = append(b, `,"at":`...)
	b = appendJSONTime(b, r.At)
	return append(b, '}')
}

// encode returns json.Marshal(r). Labels are rare: encoding/json writes
// a record that has them.
func (r waiterRecord) encode() []byte {
	if len(r.Labels) > 0 {
		b, _ := json.Marshal(r)
		return b
	}
	b := appendNames(make([]byte, 0, 64+len(r.Holder)+len(r.Tenant)+len(r.Instance)), r.Holder, r.Tenant, r.Instance)
	b = append(b, `,"since":`...)
	b = appendJSONTime(b, r.Since)
	return append(b, '}')
}

// appendNames opens a seat or waiter record: its holder, and its tenant
// and instance unless empty (omitempty).
func appendNames(b []byte, holder, tenant, instance string) []byte {
	b = append(b, `{"holder":`...)
	b = appendJSONString(b, holder)
	if tenant != "" {
		b = append(b, `,"tenant":`...)
		b = appendJSONString(b, tenant)
	}
	if instance != "" {
		b = append(b, `,"instance":`...)
		b = appendJSONString(b, instance)
	}
	return b
}

// appendJSONString appends s as json.Marshal encodes it. Printable ASCII
// that encoding/json leaves alone is copied; any other string is left to
// encoding/json, which escapes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONTime appends t as json.Marshal encodes it: RFC 3339 with
// nanoseconds. The records' times are read from the clock, in UTC, so they
// lie in the years json.Marshal encodes (0 to 9999).
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// decodeSeatRecord decodes a seat key's value. A slot field that is absent
// reads as -1 (no slot).
func decodeSeatRecord(b []byte) (seatRecord, error) {
	if r, ok := scanSeatRecord(b); ok {
		return r, nil
	}
	r := seatRecord{TenantSlot: -1, BindSlot: -1}
	err := json.Unmarshal(b, &r)
	return r, err
}

// scanSeatRecord reads b if it is exactly what encode writes for the
// record it reads (checked by encoding that record again); otherwise it
// returns false, and json.Unmarshal decodes b.
func scanSeatRecord(b []byte) (seatRecord, bool) {
	var r seatRecord
	sc := &scanner{b: b}
	ok := sc.names(&r.Holder, &r.Tenant, &r.Instance) &&
		sc.lit(`,"nonce":`) && sc.uint(&r.Nonce) &&
		sc.lit(`,"claimedAt":`) && sc.time(&r.ClaimedAt) &&
		sc.lit(`,"tenantSlot":`) && sc.int(&r.TenantSlot) &&
		sc.lit(`,"bindSlot":`) && sc.int(&r.BindSlot) && sc.lit(`}`)
	return r, ok && sc.i == len(b) && bytes.Equal(r.encode(), b)
}

// decodeWaiterRecord decodes a queue key's value.
func decodeWaiterRecord(b []byte) (waiterRecord, error) {
	var r waiterRecord
	sc := &scanner{b: b}
	ok := sc.names(&r.Holder, &r.Tenant, &r.Instance) &&
		sc.lit(`,"since":`) && sc.time(&r.Since) && sc.lit(`}`)
	if ok && sc.i == len(b) && bytes.Equal(r.encode(), b) {
		return r, nil
	}
	r = waiterRecord{}
	err := json.Unmarshal(b, &r)
	return r, err
}

// scanner reads the fields of a record in the order encode writes them.
type scanner struct {
	b []byte
	i int
}

// names reads what appendNames writes.
func (sc *scanner) names(holder, tenant, instance *string) bool {
	return sc.lit(`{"holder":`) && sc.str(holder) &&
		(!sc.lit(`,"tenant":`) || sc.str(tenant)) &&
		(!sc.lit(`,"instance":`) || sc.str(instance))
}

// lit consumes s if the input continues with it.
func (sc *scanner) lit(s string) bool {
	if len(sc.b)-sc.i < len(s) || string(sc.b[sc.i:sc.i+len(s)]) != s {
		return false
	}
	sc.i += len(s)
	return true
}

// token consumes the bytes up to the next of stop (not included).
func (sc *scanner) token(stop string) []byte {
	j := sc.i
	for j < len(sc.b) && strings.IndexByte(stop, sc.b[j]) < 0 {
		j++
	}
	t := sc.b[sc.i:j]
	sc.i = j
	return t
}

// str reads a quoted string without escapes (encode copies those alone).
func (sc *scanner) str(v *string) bool {
	if !sc.lit(`"`) {
		return false
	}
	t := sc.token(`"\`)
	*v = string(t)
	return sc.lit(`"`)
}

func (sc *scanner) uint(v *uint64) bool {
	n, err := strconv.ParseUint(string(sc.token(",}")), 10, 64)
	*v = n
	return err == nil
}

func (sc *scanner) int(v *int) bool {
	n, err := strconv.Atoi(string(sc.token(",}")))
	*v = n
	return err == nil
}

func (sc *scanner) time(v *time.Time) bool {
	var s string
	if !sc.str(&s) {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	*v = t
	return err == nil
}
