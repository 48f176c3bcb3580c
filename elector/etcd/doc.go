// Package etcd is the etcd backend of electd's elector.
//
// # Algorithm
//
// It runs the algorithm of etcd's concurrency.Election, with the same key
// layout (PREFIX/ELECTION/<lease id in hex>, so `etcdctl elect --listen`
// can watch an electd election), on a lease that this package renews itself:
//
//  1. Grant a lease and start renewing it every RenewInterval with
//     KeepAliveOnce, noting when each renewal was sent. Each acknowledged
//     renewal moves the local deadline to sendTime + TTL·(1 − drift) − ε.
//  2. Put our key under the lease if absent; its create revision is our
//     place in the queue and, later, our fencing token.
//  3. Watch only the key just ahead of ours until it is deleted (a leader's
//     exit wakes only its successor), then look again.
//  4. Confirm our key is first and our deadline still holds (etcd's
//     Election would return even if our key had expired meanwhile).
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
// etcd expires a lease at the earliest TTL after it *received* the last
// keepalive (and extends leases on a leader change), so the store cannot
// grant the next term before this candidate's ValidUntil, provided the
// clocks' rates differ by less than the drift allowance. A TTL that is not a
// whole number of seconds is rounded up for etcd (its leases have whole
// seconds), which only makes the store hold the lease longer than we rely
// on. An operator deleting the key or revoking the lease by hand hands
// leadership over at once: the old leader sees it through its watch, but a
// successor may already be elected by then; fencing tokens cover that case.
//
// Tokens are create revisions of the leader keys, which strictly increase.
package etcd
