// Package status is what `electd status` prints and GET /status serves:
// one reading of an election (Read) and its rendering as text or JSON
// (Report.WriteText, encoding/json).
//
// A reading asks the store, through a candidate that never campaigns:
// its line (elector.Queuer: every candidate in arrival order, the holder
// of every slot with its fencing token), the --once-per run record
// (elector.Locker.LastRun), and whether the store answers (a ping). It
// writes nothing to the election, and its reading of the queue writes
// nothing at all; reading the run record does what LastRun does for every
// reader: Redis deletes a lapsed record, and redlock copies a live one
// back to the servers that lack it (read repair).
//
// Guarantees:
//   - Text from the store (ids, addresses) is printed escaped
//     (leaderwatch.EscapeText): it can neither forge lines nor drive the
//     terminal.
//   - A store that does not answer is reported as such (Report.Store), not
//     as an empty election, and Read's error is then a
//     *store.UnreachableError (exit 69).
//
// Not guaranteed: that the parts agree to the instant (the line, the run
// record and the ping are separate requests), or that a line without a
// holder stays so (a store may grant at the next step of a candidate).
package status
