package coordinator

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// rebuild turns a parsed key back into a key string.
func rebuild(k keys, pk parsedKey) string {
	switch pk.Seg {
	case segSpec:
		return k.spec(pk.Pool)
	case segInstances:
		return k.instance(pk.Pool, pk.Name)
	case segSeats:
		return k.seat(pk.Pool, pk.Slot, pk.Claim)
	case segReleased:
		return k.released(pk.Pool, pk.Slot)
	case segBinds:
		return k.bind(pk.Pool, pk.Name, pk.Slot, pk.Claim)
	case segTenants:
		return k.tenant(pk.Pool, pk.Name, pk.Slot, pk.Claim)
	case segQueue:
		return k.queue(pk.Pool) + pk.Name
	case segFences:
		return k.fence(pk.Pool, leaseOfHex(pk.Name))
	}
	return ""
}

// cn is a claim name as claims write it.
var cn = queueName(0x1234, 7)

func FuzzParseKey(f *testing.F) {
	k := keys{root: DefaultPrefix}
	for _, s := range []string{
		k.spec("p"), k.instance("p", "bot-1"), k.seat("p", 7, cn), k.bind("p", "i", 0, cn), k.tenant("p", "acme", 3, cn),
		"/etcdpool/pools/p/grants/" + cn, "/etcdpool/pools/p/seats/0000007/" + cn + "/x", "/etcdpool/pools/p/seats/0000007",
		k.queueKey("p", 0x1234, 99), k.fence("p", clientv3.LeaseID(0xabc)), k.released("p", 9999999),
		"/etcdpool/pools/p/seats/1", "/etcdpool/pools//spec", "/etcdpool/pools/p/seats/-000001", "/other/p/spec",
		// Signed slots, which parsed as slots until 2026-12-04 (a review).
		k.seats("p") + "+000001/" + cn, k.seats("p") + "-000000/" + cn, k.tenants("p", "acme") + "+000000/" + cn,
		"/etcdpool/pools/p/released/+000003",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		pk, err := k.parse(key)
		if err != nil {
			return
		}
		if got := rebuild(k, pk); got != key {
			t.Fatalf("parse(%q) = %+v, which rebuilds as %q", key, pk, got)
		}
		if pk.Slot >= 0 && len(slot(pk.Slot)) != slotWidth {
			t.Fatalf("slot %d does not fit %d digits", pk.Slot, slotWidth)
		}
	})
}

func TestSlotOrderIsNumeric(t *testing.T) {
	k := keys{root: DefaultPrefix}
	for n := 0; n < MaxCapacity; n += 997 {
		if !(k.seat("p", n, cn) < k.seat("p", n+1, cn)) {
			t.Fatalf("seat %d does not sort before %d", n, n+1)
		}
	}
	if strings.HasPrefix(k.seat("p", 10, cn), slotPrefix(k.seats("p"), 1)) {
		t.Fatal("seats/1 is a prefix of seats/10")
	}
	if k.seat("p", MaxCapacity, cn) >= clientv3.GetPrefixRangeEnd(k.seats("p")) {
		t.Fatal("the highest slot falls outside the seats range")
	}
}

func FuzzDecodeSpec(f *testing.F) {
	for _, s := range []string{`{"capacity":3}`, `{"capacity":30,"seatTTLSeconds":10,"tenantLimit":2,"tenantLimits":{"a":1}}`,
		`{capacity`, ``, `null`, `{"capacity":1e9}`, `{"capacity":3,"tenantLimits":{"a/b":1}}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		spec, err := decodeSpec("p", b)
		if err != nil {
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("decoded an invalid spec: %v", err)
		}
		again, _ := json.Marshal(spec)
		spec2, err := decodeSpec("p", again)
		if err != nil || !reflect.DeepEqual(normal(spec), normal(spec2)) {
			t.Fatalf("round trip: %+v -> %s -> %+v (%v)", spec, again, spec2, err)
		}
	})
}

func normal(s PoolSpec) PoolSpec {
	if len(s.TenantLimits) == 0 {
		s.TenantLimits = nil
	}
	return s
}

// TestOldSchemaKeysAreNamed checks that seat and slot keys of the schema
// before hand-offs (v0.3), and grant keys (v0.4), are told apart from other
// foreign keys.
func TestOldSchemaKeysAreNamed(t *testing.T) {
	k := keys{root: DefaultPrefix}
	for _, key := range []string{k.seats("p") + "0000003", k.binds("p", "bot") + "0000000", k.tenants("p", "acme") + "0000001",
		k.pool("p") + "grants/" + cn} {
		if _, err := k.parse(key); !errors.Is(err, errOldSchema) || !errors.Is(err, ErrInvalid) {
			t.Errorf("parse(%q) = %v, want the old-schema error", key, err)
		}
	}
	for _, key := range []string{k.seats("p") + "x", k.seat("p", 3, cn) + "/x", k.seats("p") + "0000003/zz", k.pool("p") + "grants/x"} {
		_, err := k.parse(key)
		if err == nil || errors.Is(err, errOldSchema) {
			t.Errorf("parse(%q) = %v, want a plain invalid-key error", key, err)
		}
		// The reason stands apart from the key and the sentinel, so that
		// no caller cuts the message (poolctl doctor prints the reason).
		ie, ok := errors.AsType[*InvalidError](err)
		if !ok || !errors.Is(err, ErrInvalid) || ie.Key != key || strings.Contains(ie.Reason, key) || strings.Contains(ie.Reason, "coordinator:") {
			t.Errorf("parse(%q): %#v, want an *InvalidError with the reason alone", key, err)
		}
	}
}
