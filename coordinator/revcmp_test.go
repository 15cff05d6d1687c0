package coordinator

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// TestRevCmp: revCmp builds the compare clientv3.Compare builds, for
// create and mod revisions, with and without a range, for each result.
func TestRevCmp(t *testing.T) {
	results := map[string]pb.Compare_CompareResult{"=": pb.Compare_EQUAL, "!=": pb.Compare_NOT_EQUAL, ">": pb.Compare_GREATER, "<": pb.Compare_LESS}
	for _, target := range []func(string) clientv3.Cmp{clientv3.CreateRevision, clientv3.ModRevision} {
		for op, result := range results {
			for _, end := range []string{"", "/k0", "\x00"} {
				want := target("/k/")
				if end != "" {
					want = want.WithRange(end)
				}
				want = clientv3.Compare(want, op, int64(42))
				got := revCmp(target("/k/"), end, result, 42)
				if !proto.Equal(got.GetCompare(), want.GetCompare()) {
					t.Errorf("revCmp(%q, %s): %v, want %v", end, op, got.GetCompare(), want.GetCompare())
				}
			}
		}
	}
}
