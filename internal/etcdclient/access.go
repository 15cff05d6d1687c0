package etcdclient

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Access is one permission a process needs, checked by CheckAccess.
type Access struct {
	// Write is true for readwrite; false for read.
	Write bool
	// Key is a key, or a prefix ending in "/" when Prefix is set.
	Key string
	// Prefix makes Key a prefix.
	Prefix bool
}

// CheckAccess asks etcd whether the client may do each of need, without
// changing anything, and returns an OpError naming the first that it
// refuses. A read is a Get of at most one key. A write is a transaction
// whose compare can never hold, with a put of the key (for a prefix, a
// delete of the whole range) in its then-branch: etcd checks the permissions of every
// operation of a transaction before it evaluates the compare, so it
// refuses the transaction when the write is not allowed, and otherwise
// applies nothing. Errors other than permanent ones are returned as they
// are, for the caller to retry or ignore.
func CheckAccess(ctx context.Context, cli *clientv3.Client, need []Access) error {
	for _, a := range need {
		var opts []clientv3.OpOption
		if a.Prefix {
			opts = append(opts, clientv3.WithPrefix())
		}
		op := "read"
		_, err := cli.Get(ctx, a.Key, append(opts, clientv3.WithLimit(1), clientv3.WithKeysOnly())...)
		if err == nil && a.Write {
			op = "write"
			write := clientv3.OpPut(a.Key, "")
			if a.Prefix {
				write = clientv3.OpDelete(a.Key, clientv3.WithPrefix())
			}
			_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(a.Key), "<", 0)).Then(write).Commit()
		}
		if err != nil {
			key := a.Key
			if a.Prefix {
				key += "*"
			}
			return Op(op, key, err)
		}
	}
	return nil
}
