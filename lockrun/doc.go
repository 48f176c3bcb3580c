// Package lockrun is one `electd lock`: wait for the lock, run the command
// once under it with the supervisor, record the run for --once-per, and
// release the lock.
//
// Guarantees:
//   - Config.Deadline (the end of --wait) bounds the whole wait: the
//     campaign, its reconnecting, and the look at who holds the lock that
//     follows, to within MaxOverrun past it, also when the store does not
//     answer.
//   - A lock not acquired is one of two errors: a *BusyError when another
//     copy holds it (or the store names a holder), a *store.UnreachableError
//     when no holder is named and the store does not answer a ping. The
//     caller maps them to exit codes (75 and 69).
//   - A lock lost while the command ran is a *LostError; the supervisor
//     has stopped the command's whole tree before the lease could lapse.
//   - When ctx ends (a signal), the error is a *StoppedError saying what
//     was done about it (queue left, command stopped, lock released).
//   - With --once-per, the command runs only when no successful run is on
//     record, read again once the lock is held; a record that cannot be
//     read then means no run.
//   - Forget (`electd lock --forget`) clears the run record and nothing
//     else: it never touches a holder of the lock, so it cannot make two
//     runs overlap. There is no eviction of a holder: one whose lease
//     lapsed is gone from the store, and one whose lease is valid must be
//     stopped where it runs.
//
// Not guaranteed: that the store has seen this copy leave the queue when
// Run returns after an unreachable store (its entry expires after one TTL).
package lockrun
