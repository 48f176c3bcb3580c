package redlock

import (
	"slices"
	"time"
)

// The lease rule of a quorum (see the package documentation, "The lease
// rule"). A term is held while a majority of the N servers hold this
// candidate's committed entry. Server s, having acknowledged a renewal sent
// at t_s, grants nobody else before t_s + TTL by its own clock, so the local
// deadline it guarantees is d_s = t_s + TTL·(1 − drift) − ε. Another
// candidate needs a majority m of all N servers; while at least m of them
// still hold d_s in the future, it cannot have one. So the term's deadline
// is the m-th latest d_s, that is Window after the m-th latest send time
// among the servers that acknowledged, and no deadline at all while fewer
// than m ever did. A server that failed to answer keeps the d_s of its
// last acknowledgement (its lease there runs on); one that says it no
// longer holds the entry keeps it too: it can only say so after that lease
// expired on it (d_s has passed) or after it lost its state, and then it
// grants nothing for one TTL (the epoch rule), past d_s. So the order
// statistic never falls, and the term's deadline only moves forward.

// majority is the number of servers of n that make a quorum.
func majority(n int) int { return n/2 + 1 }

// quorumSent returns the m-th latest of the acknowledged send times sent
// (one per server, zero for a server that never acknowledged), where m is
// a majority of len(sent), and false when fewer than m acknowledged: the
// term's deadline is elector.Timing.DeadlineAfter of it.
func quorumSent(sent []time.Time) (time.Time, bool) {
	m := majority(len(sent))
	acked := make([]time.Time, 0, len(sent))
	for _, t := range sent {
		if !t.IsZero() {
			acked = append(acked, t)
		}
	}
	if len(acked) < m {
		return time.Time{}, false
	}
	slices.SortFunc(acked, func(a, b time.Time) int { return b.Compare(a) }) // latest first
	return acked[m-1], true
}

// quorumWake returns the earliest moment at which a majority of the n
// servers may let this waiter lead: the m-th earliest of the per-server
// moments at (zero for a server that gave none, which never counts), and
// false when fewer than m gave one.
func quorumWake(at []time.Time) (time.Time, bool) {
	m := majority(len(at))
	known := make([]time.Time, 0, len(at))
	for _, t := range at {
		if !t.IsZero() {
			known = append(known, t)
		}
	}
	if len(known) < m {
		return time.Time{}, false
	}
	slices.SortFunc(known, func(a, b time.Time) int { return a.Compare(b) })
	return known[m-1], true
}
