package coordinator

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The guards that keep the shared state owned by one writer at a time:
// these are in-memory rules, tested without etcd.

// fedState returns a shared state of pool "p" at revision 5 with one held
// seat, kept by a synced feed.
func fedState() (*sharedState, *poolFeed) {
	k := keys{root: "/t"}
	sh := &sharedState{st: newPoolState(k, "p")}
	f := &poolFeed{sh: sh, synced: true, changed: make(chan struct{}), subs: map[string][]*feedSub{}}
	sh.fed = f
	sh.st.load(5, []*mvccpb.KeyValue{{Key: []byte(k.seat("p", 0, queueName(1, 1))), Value: []byte(`{}`), CreateRevision: 5, ModRevision: 5, Version: 1, Lease: 1}})
	return sh, f
}

// emptyProbe is a probe read at rev that shows no keys.
func emptyProbe() []*pb.ResponseOp {
	out := make([]*pb.ResponseOp, probeTenant)
	for i := range out {
		out[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{}}}
	}
	return out
}

// unchanged fails unless sh still holds fedState's view.
func unchanged(t *testing.T, sh *sharedState, what string) {
	t.Helper()
	if sh.st.rev != 5 || sh.st.probed || sh.st.heldSeats() != 1 {
		t.Errorf("%s replaced the feed's view: rev %d, probed %v, %d seats held; want rev 5, whole, 1 held",
			what, sh.st.rev, sh.st.probed, sh.st.heldSeats())
	}
}

// TestStoppedFeedDoesNotWrite: a feed whose last user left, and which a new
// feed replaced, may still apply a watch response that was on its way. It
// must not change the state the new feed owns; it still wakes its own
// users.
func TestStoppedFeedDoesNotWrite(t *testing.T) {
	sh, old := fedState()
	next := &poolFeed{sh: sh, synced: true, changed: make(chan struct{}), subs: map[string][]*feedSub{}}
	sh.fed = next
	woken := old.changed
	old.update(true, nil, old.owned(func(st *poolState) { st.load(9, nil) }))
	unchanged(t, sh, "a stopped feed's reload")
	select {
	case <-woken:
	default:
		t.Error("the stopped feed did not wake its own users")
	}
	next.update(true, nil, next.owned(func(st *poolState) { st.load(9, nil) }))
	if sh.st.rev != 9 {
		t.Errorf("the current feed's reload left rev %d, want 9", sh.st.rev)
	}
}

// TestProbeDoesNotReplaceFeed: a probe read before a feed synced, and
// folded in after, must not replace the feed's whole view with a part:
// neither a claim's refresh nor a failed claim's Else branch. Nor may the
// claim count the feed's view as the read: the feed may not have brought
// what the probe saw yet (a seat freed just before), and a claim that
// refused on it would refuse on a state older than its own read. CI saw
// exactly that (TestStaleReleaseKeepsCacheHonest: "holds 3 of 3" just
// after a force-release).
func TestProbeDoesNotReplaceFeed(t *testing.T) {
	sh, _ := fedState()
	if sh.takeProbe(7, emptyProbe(), clientv3.LeaseID(1)) {
		t.Error("takeProbe reported a probe taken that the feed's state stood in for")
	}
	unchanged(t, sh, "a refresh's probe")

	sh, _ = fedState()
	resp := &clientv3.TxnResponse{Header: &pb.ResponseHeader{Revision: 7}, Responses: emptyProbe()}
	if sh.absorb(&claimPlan{lease: 1, probe: true}, resp) {
		t.Error("absorb reported an Else read taken that the feed's state stood in for")
	}
	unchanged(t, sh, "a failed claim's probe")

	// Without a feed, the same probe is taken.
	sh, _ = fedState()
	sh.fed = nil
	if !sh.takeProbe(7, emptyProbe(), clientv3.LeaseID(1)) {
		t.Error("without a feed takeProbe reported the probe not taken")
	}
	if sh.st.rev != 7 || !sh.st.probed {
		t.Errorf("without a feed the probe was not taken: rev %d, probed %v", sh.st.rev, sh.st.probed)
	}
	sh, _ = fedState()
	sh.fed = nil
	if !sh.absorb(&claimPlan{lease: 1, probe: true}, resp) {
		t.Error("without a feed absorb reported the Else read not taken")
	}
}
