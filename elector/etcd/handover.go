package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The hand-over: one store write between one term and the next.
//
// A leader that releases its term (resign, stop, its deadline's end) with
// a candidate queued behind it does not just revoke its lease: it reads
// the queue's first two keys, and in one transaction deletes its own key
// and writes the start of a term (value.Since) into its successor's,
// under the successor's lease, if the queue is still what it read: its own
// key still there with its create revision, and the successor's key
// unchanged since the read (its mod revision). No other key can be ahead of
// the successor then: the read (of one revision, even a stale one) found
// none created before it but the leader's, and a key created later has a
// later revision. It then
// revokes its lease, off the successor's path.
//
// The successor, which watches the key ahead of it, sees it deleted at
// revision R and reads its own key at R: if that key was written at R, by
// the hand-over (nobody else writes another candidate's key), with the
// successor's own create revision and lease and a start of term, then at R
// the successor's key was the first of the election, which is exactly what
// its own claim would have checked, and it leads without a write of its
// own. Its term's deadline is its session's, from its own proved renewals,
// as after a claim; its fencing token is its key's create revision, as
// after a claim. Otherwise (a leader that revoked, crashed or expired, or
// one of an older electd; the read failed) it claims as before.
//
// On the critical path a hand-over costs one write and two serializable
// reads (the leader's read of the queue, the successor's read at R), where
// it cost two writes (the revocation, the successor's claim): on etcd a
// write waits for a quorum's WAL fsync, a serializable read for the member
// alone.
//
// Semaphores (Slots > 1) do not hand over: a released slot goes to whoever
// claims it.
//
// A waiter's key carries its renewal grid from the start (join), so that
// the hand-over's copy of it tells the successor's own head waiter when to
// look at the successor's lease (expire.go), with no write of the
// successor's.

// handOver deletes s's key and hands the term to its successor in one
// transaction; it reports whether it did. Any failure (no successor, one
// that is not a plain candidate of ours, a queue that changed, the
// store's error) leaves the key to the revocation that follows.
func (s *session) handOver(ctx context.Context) bool {
	e := s.e
	if e.Slots() != 1 || !s.leading.Load() || s.key == "" {
		return false
	}
	// Serializable: the member's own copy, without a raft round. A stale
	// copy can only miss a successor that joined since (then the key is
	// revoked as before); the transaction's compares hold the rest.
	g, err := e.client.Get(ctx, e.pfx, clientv3.WithPrefix(), clientv3.WithSerializable(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(2))
	if err != nil {
		e.log.Debug("hand-over: the queue could not be read; revoking", "err", err)
		return false
	}
	if len(g.Kvs) < 2 || string(g.Kvs[0].Key) != s.key || g.Kvs[0].CreateRevision != s.rev {
		return false // nobody to hand over to, or our key is gone
	}
	next := g.Kvs[1]
	v, ours := ourValue(next.Value)
	if !ours || v.slots() != 1 || !v.Since.IsZero() || next.Lease == 0 {
		return false // not a plain waiting candidate of ours
	}
	v.Since = e.clk.Now().UTC().Round(0)
	handed := encodeValue(v)
	succ := string(next.Key)
	resp, err := e.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(s.key), "=", s.rev),
			clientv3.Compare(clientv3.ModRevision(succ), "=", next.ModRevision)).
		Then(clientv3.OpDelete(s.key), clientv3.OpPut(succ, handed, clientv3.WithLease(clientv3.LeaseID(next.Lease)))).
		Commit()
	switch {
	case err != nil:
		e.ins.StoreError("resign", err)
		e.log.Debug("hand-over failed; revoking", "err", err)
		return false
	case !resp.Succeeded:
		e.log.Debug("hand-over: the queue changed since it was read; revoking")
		return false
	}
	e.log.Debug("handed over", "to", v.ID, "key", succ, "at_rev", resp.Header.Revision)
	return true
}

// handedOver reports whether the deletion of the key ahead of s at rev
// handed the term to s (see above), and the term's start it wrote.
func (e *Elector) handedOver(ctx context.Context, s *session, rev int64) (time.Time, bool) {
	if e.Slots() != 1 {
		return time.Time{}, false
	}
	gctx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	// Serializable: a member that has applied rev answers from its own copy
	// (a revision is history: every member's copy of it is the same); one
	// that has not yet refuses it as a future revision, and the read is
	// asked again linearizably.
	g, err := e.client.Get(gctx, s.key, clientv3.WithRev(rev), clientv3.WithSerializable())
	if err != nil {
		g, err = e.client.Get(gctx, s.key, clientv3.WithRev(rev))
	}
	if err != nil || len(g.Kvs) != 1 {
		return time.Time{}, false
	}
	kv := g.Kvs[0]
	v, _ := ourValue(kv.Value)
	if kv.ModRevision != rev || kv.CreateRevision != s.rev || clientv3.LeaseID(kv.Lease) != s.lease || v.Since.IsZero() || v.ID != e.id {
		return time.Time{}, false
	}
	return v.Since, true
}
