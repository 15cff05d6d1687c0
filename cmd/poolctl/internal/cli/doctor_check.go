package cli

import (
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/etcdpool/etcdpool/coordinator"
)

// finding is one problem doctor found in one key.
type finding struct {
	Key      string
	Problem  string
	Fixable  bool  // --fix deletes the key
	Revision int64 // the key's mod revision when read; --fix compares it
	Action   string
}

// leasedSegs are the segments whose keys must carry a lease: without one
// they never expire, and a seat or waiter without one blocks its pool
// for good.
var leasedSegs = map[string]bool{
	coordinator.SegInstances: true, coordinator.SegSeats: true, coordinator.SegBinds: true,
	coordinator.SegTenants: true, coordinator.SegQueue: true, coordinator.SegFences: true,
	coordinator.SegWaiting: true,
}

// diagnose returns what is wrong with kv, a key under root's pools/
// prefix, or ok=false when nothing is. It is pure: doctor's rules, in one
// place.
func diagnose(root string, kv *mvccpb.KeyValue) (f finding, ok bool) {
	key := string(kv.Key)
	f = finding{Key: key, Revision: kv.ModRevision, Fixable: true}
	pk, err := coordinator.ParseKey(root, key)
	switch {
	case coordinator.IsOldSchema(err):
		f.Problem = keyReason(err) + ", written by an older etcdpool: claims on the pool refuse to run while it exists; " +
			"it goes with its writer's lease (stop or upgrade that process), or --fix deletes it"
	case err != nil:
		f.Problem = "foreign key, not written by etcdpool: " + keyReason(err)
	case pk.Slot >= coordinator.MaxCapacity:
		f.Problem = fmt.Sprintf("%s number %d above the seat-number range 0..%d", slotKind(pk.Seg), pk.Slot, coordinator.MaxCapacity-1)
	case leasedSegs[pk.Seg] && kv.Lease == 0:
		f.Problem = fmt.Sprintf("%s key without a lease: it never expires", strings.TrimSuffix(pk.Seg, "s"))
	case pk.Seg == coordinator.SegInstances:
		err := coordinator.CheckInstanceValue(pk.Name, kv.Value)
		switch {
		case errors.Is(err, coordinator.ErrNotInstance):
			f.Problem = "corrupt instance value (its agent registers it again once deleted): " + keyReason(err)
		case err != nil:
			// Perhaps a newer etcdpool's (a state this version does not
			// know): deleting it would end its holders' seats.
			f.Problem, f.Fixable = "instance value this version does not accept, so its claims do not bind to it "+
				"(a newer etcdpool's, or written by hand; fix or deregister it): "+keyReason(err), false
		}
	case pk.Seg == coordinator.SegSeats:
		if err := coordinator.CheckSeatValue(kv.Value); err != nil {
			f.Problem = "corrupt seat value (deleting it frees the seat): " + keyReason(err)
		}
	case pk.Seg == coordinator.SegSpec:
		if err := coordinator.CheckSpecValue(pk.Pool, kv.Value); err != nil {
			f.Problem, f.Fixable = "corrupt pool spec; fix it with `poolctl pool set` or remove the pool: "+keyReason(err), false
		}
	}
	return f, f.Problem != ""
}

func slotKind(seg string) string {
	if seg == coordinator.SegSeats || seg == coordinator.SegReleased {
		return "seat"
	}
	return "slot"
}

// keyReason is a validation error's reason alone: the finding names the
// key already.
func keyReason(err error) string {
	if ie, ok := errors.AsType[*coordinator.InvalidError](err); ok {
		return ie.Reason
	}
	return err.Error()
}
