// Package etcdclient is the one etcd connection path of poolctl and
// poolagent: one Config struct, one function that turns it into a
// clientv3.Config (TLS through transport.TLSInfo, as etcdctl does), the
// endpoint forms both binaries accept, the credentials rules, a dial that
// names the TLS cause of a failed connection in one line, and the one
// classification of etcd and gRPC errors into permanent, ambiguous and
// transient.
//
// What it does not do: it never retries. Callers decide, using Classify:
// a permanent error ends the command, a transient one may be retried, an
// ambiguous one must be resolved by reading back before a retry.
package etcdclient
