// Package kube is the Kubernetes backend: an election is a
// coordination.k8s.io/v1 Lease named after it, in one namespace, the
// object client-go's leaderelection (LeaseLock), the controller managers
// and the CSI sidecars use. `kubectl get lease NAME` shows the holder.
//
// # The Lease
//
// A term writes holderIdentity (the candidate's id), leaseDurationSeconds
// (--ttl, whole seconds), acquireTime, renewTime and one more
// leaseTransitions, as client-go does, and three annotations client-go
// keeps untouched: the fencing token, the address, and the holder they
// belong to. Every write is an update conditioned on the resourceVersion
// the writer saw (optimistic concurrency): of two writers that saw the
// same version, one fails with a conflict.
//
// # Timing without a server clock
//
// The API server expires nothing; only the candidates' own clocks do.
//
//   - The leader's deadline (elector.Term.ValidUntil) is the send time of
//     its last successful update plus TTL·(1−drift) − ε, as on every store.
//   - A waiter may take the Lease only once it has seen the same version
//     of it, unchanged, for the Lease's whole duration on its own
//     monotonic clock, counted from the moment that version first reached
//     it. Its update carries that version, so a renewal it has not seen
//     makes the update fail.
//
// Three refinements keep that true against writers other than electd:
//
//   - A client-go elector times a holder from its first sight of a
//     LeaderElectionRecord different from the last one it saw, and it
//     compares renewTime to the second. So a renewal counts from the send
//     time of the first write of the record client-go still sees (the
//     first renewal in its wall-clock second), and with a renewal interval
//     under a second, electd renews just after each second begins. A claim
//     of a hand-over adds a transition, so that client-go sees a new
//     record. Below a 1 s renewal interval (ttl under 5 s by default), the
//     deadline thus moves once a second, and a missed renewal may end the
//     term.
//   - A version of the same term is timed for the longest duration the
//     term was seen with, and every renewal and claim writes the
//     candidate's own: a hand edit that shortens it is not believed.
//   - electd's own release marks the Lease (electd.io/released) after the
//     term ended: such a Lease is taken at once. A Lease deleted, or
//     cleared by anyone else (kubectl, client-go's ReleaseOnCancel), is
//     timed for its last holder's duration from the moment that was seen,
//     since that holder, cut off, may not know. A candidate that never saw
//     a holder takes a missing or empty Lease at once.
//
// Why no two terms overlap, with clock rates apart by at most drift: the
// version a waiter times was written by the leader's last successful
// renewal, sent at s, before the waiter saw it (at o ≥ s). Any later
// renewal changes the version and defeats the waiter's update. So the
// waiter's update lands after o + D on its clock, at least s + D·(1−drift)
// on the leader's, after the leader's deadline s + TTL·(1−drift) − ε (D is
// TTL). A waiter that joins late, or whose watch lags, sees the version
// later: it waits longer, never shorter. An API server that restarts keeps
// the versions (they are etcd's revisions); while it is down no renewal
// succeeds, and the leader's deadline ends its term. The same rule makes
// electd wait out a client-go holder for the duration it wrote, and a
// client-go elector waits out electd's holder for the same reason (it
// times leaseDurationSeconds from its own observation).
//
// A holder that resigns hands the Lease to the first in line, who claims
// it at once, or, with nobody in line, clears holderIdentity (as
// client-go's ReleaseOnCancel does, and marked as electd's release): any
// elector takes it at once. A Lease that was never seen held is taken at
// once.
//
// # The line, and no herd
//
// Every waiting candidate keeps a ticket: a Lease of its own named
// NAME.q-RANDOM, labelled electd.io/queue=NAME, renewed every TTL/3. The
// line is the tickets in the order of their creation (the resourceVersion
// of the create, which the owner writes into the electd.io/order
// annotation with its first renewal). Each candidate runs two watches,
// one on the Lease and one on the tickets, resumed from the last version
// seen; nothing polls. On a change only the first live ticket's owner
// writes: one update per leader change, however many wait. A ticket that
// stands unchanged for one TTL and one renewal interval is dead (its
// owner crashed or was cut off); the waiter behind it removes it, and a
// candidate whose ticket was removed joins again at the back. A create
// whose answer is lost is tried again under the same name, and the
// ticket it finds is adopted: a lost answer leaves no second ticket of the
// candidate's in line. So the line is first come, first served among
// live waiters.
//
// # Fencing tokens
//
// A term's token is one more than the highest of: the version its update
// was conditioned on, every version this candidate has seen (of any Lease
// in the election, and of every list), and every token it has seen that
// is not above the version of the Lease that carried it. The API
// server's versions are etcd's revision, which grows with every write to
// any object (apimachinery's CompareResourceVersion orders them). So a
// token is at most the version of the write that grants it, and each
// later grant is an update conditioned on a version at least that one:
// tokens grow. Where the Lease is missing (first use, or deleted by
// someone), a candidate first creates it with no holder and then takes
// it with a conditioned update, so the created version, above every
// earlier write, bounds its token from below; a bare create would not
// (it tells nothing of a term begun and ended between the candidate's
// last look and the create's landing). The same holds when
// leaseTransitions starts again at 0, or a client-go term comes between.
// A token set by hand above the Lease's version is ignored. Assumed: the
// API server's etcd is not restored to an earlier revision (etcdutl
// snapshot restore has --bump-revision for that).
//
// # What it does not do
//
//   - Semaphores (--slots > 1) are refused.
//   - A holder written by hand (kubectl edit) is respected like any other:
//     the leader sees its term lost as soon as its watch shows it, the
//     others wait the duration. A Lease deleted by hand while its holder is
//     cut off is taken at once by a candidate that had never seen it held.
//   - Hand edits that shorten a duration before any candidate saw the
//     term's longer one are believed.
//   - A client-go elector takes the Lease as soon as it finds it free; it
//     does not queue behind electd's tickets.
//
// RBAC: get, list, watch, create, update and delete on
// leases.coordination.k8s.io in the namespace (Role). A missing verb is
// refused at start, naming it.
package kube
