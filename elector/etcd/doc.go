// Package etcd is the etcd backend of electd's elector.
//
// # Algorithm
//
// It runs the algorithm of etcd's concurrency.Election, with the same key
// layout (PREFIX/ELECTION/<lease id in hex>, so `etcdctl elect --listen`
// can watch an electd election), on a lease that this package renews itself:
//
//  1. Grant a lease and start renewing it on the grid
//     grantSendTime + k·RenewInterval, noting when each renewal was sent.
//     Each renewal goes through one member, on a connection of the
//     Elector's own to it, and is followed there by a raft entry that
//     writes nothing: it counts only if the member reports the same raft
//     term before the renewal and after the entry, which proves that the
//     raft leader that served it still led with a quorum after
//     (renewal.go). A counted
//     renewal moves the local deadline to sendTime + TTL·(1 − drift) − ε.
//     A failed renewal is retried after min(RenewInterval/4, 250 ms) (on a
//     cluster, through the next member), earning its deadline from its own
//     send time.
//  2. Put our key under the lease if absent; its create revision is our
//     place in the queue and, later, our fencing token.
//  3. In one transaction: if our key still exists and no key of the
//     election was created before it, write the term's start into our key
//     and lead; else read the key just ahead of ours. (etcd's Election
//     reads instead, and would return even if our key had expired
//     meanwhile.) After a predecessor's exit this is the one round trip
//     between its deletion and our term (the compare ranges over the
//     election's keys inside etcd: one request, whatever their number).
//  4. Watch only the key just ahead of ours until it is deleted (a leader's
//     exit wakes only its successor), then go back to 3. A term begins only
//     while our local deadline still holds. The waiter at the head of the
//     queue also watches the leader's lease: once LeaseTimeToLive's answers
//     prove it expired, it revokes it instead of waiting up to 500 ms for
//     etcd's lessor loop (expire.go has the proof and its cost).
//
// concurrency.Session is not used because its KeepAlive renews on its own
// schedule and never reports when a renewal was sent, so no safe local
// deadline can be derived from it; and its Done closes only when the client
// library notices, which can be after the successor was granted (see
// TestCutOffBeatsSessionDone).
//
// # When a term ends
//
// Term.Done closes at the earliest of: the local deadline passing without an
// acknowledged renewal; a renewal answered "lease not found"; our key deleted
// or replaced (watched); Resign; Close. The lease is then revoked (best
// effort), deleting the key so the successor is woken at once.
//
// # Guarantees and non-guarantees
//
// etcd expires a lease at the earliest TTL after its raft leader
// *received* the last keepalive, and a new raft leader extends every lease
// by TTL and an election timeout from its own start. A renewal counts only
// once a quorum is shown to have followed the raft leader that served it
// after it did (renewal.go), so every later raft leader started after it.
// So the store cannot grant the next term before this candidate's
// ValidUntil, provided the clocks' rates differ by less than the drift
// allowance. Not supported: etcd's lease checkpointing (the alpha feature
// gate LeaseCheckpoint, off by default) with a checkpoint interval shorter
// than the TTL: a new raft leader then extends a checkpointed lease by its
// remaining time at the checkpoint instead of its TTL. (etcd checkpoints
// only leases with more than the interval, 5 minutes by default, to run.) A TTL that is not a
// whole number of seconds is rounded up for etcd (its leases have whole
// seconds), which only makes the store hold the lease longer than we rely
// on. An operator deleting the key or revoking the lease by hand hands
// leadership over at once: the old leader sees it through its watch, but a
// successor may already be elected by then; fencing tokens cover that case.
//
// Tokens are create revisions of the leader keys, which strictly increase.
//
// # Locks and semaphores
//
// TryCampaign (`electd lock --wait 0`) queues like Campaign but, if a key
// is ahead of ours, revokes the lease (deleting the key) and returns
// elector.ErrBusy instead of waiting.
//
// With Slots N > 1 (SetSlots, or Config.Slots) the election is a semaphore:
// a candidate holds once fewer than N keys were created before its own.
// Each waiter watches the N keys just ahead of it (a deletion further ahead
// does not change that set), so a release wakes at most the N waiters
// within N places behind it; one of them holds, the others look once and
// watch again. The final check is that our key is among the first N by
// create revision. Every key's value carries its N ("slots", omitted for 1,
// so plain election keys are unchanged); a candidate that reads another N
// in the keys it looks at (its predecessors, the first N) leaves and returns
// an *elector.SlotsError. Tokens are still create revisions: distinct, and
// growing in grant order, since slots are granted in queue order.
//
// RecordRun and LastRun keep a once-per-period run record in
// RUNPREFIX/ELECTION (default /electd/runs/), on a lease of the period;
// ForgetRun deletes it.
package etcd
