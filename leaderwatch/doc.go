// Package leaderwatch is what `electd leader` shows: it prints a leader
// (Printer), and for --watch follows the election's leader and tells a
// store that cannot be reached from an election that has no leader.
//
// Guarantees:
//   - Text from the store (a leader's id and address) is printed escaped:
//     it can neither forge lines nor drive the terminal.
//   - Each term is shown once, with the since it was first seen with
//     (health.Terms), even when the store publishes it twice.
//   - While the store does not answer (any operation fails, or the ping
//     that Reachability.Probe sends now and then), the leader is unknown,
//     not "none": a "no leader" is held back, and shown only if the store
//     still says so once it answers again. The notices stream says when
//     the store stops answering, once per outage, and when it answers
//     again.
//   - With a give-up bound, an outage that lasts that long ends the watch
//     with a *store.UnreachableError; without one, the watch waits for the
//     store for ever.
//
// Not guaranteed: that every intermediate leader is shown (a watcher that
// lags sees the newest), or that an outage shorter than the ping interval
// is noticed.
package leaderwatch
