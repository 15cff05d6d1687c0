// Package audit writes the durable record of what happened to etcdpool's
// pools as JSON lines: every claim, release, force-release (with who and
// why), expiry, instance registration, drain and deregistration, and pool
// creation, spec change and deletion, each with the etcd revision that
// made it. Waiters joining and leaving the queue are not recorded.
//
// The log follows the coordinator's event stream (Coordinator.WatchFrom),
// which reads etcd and never writes it. A log written to a file resumes,
// after a restart, from the last revision in the file: events of that
// revision already written are not written again, and every later event
// still in etcd's history is. When etcd compacted revisions the log had not
// read yet (it was stopped longer than the compaction retention, or fell
// behind), it writes a "gap" record naming the missing revisions and logs a
// warning; nothing else is ever skipped. A new or empty file starts at the
// current revision. A log written to stdout ("-") always starts at the
// current revision.
//
// Each line is a Record. The revision orders records and identifies an
// event together with its type, pool and seat or instance, so a reader
// merging logs of several agents can drop duplicates. The time field is
// when this process read the event, not when etcd applied it.
package audit
