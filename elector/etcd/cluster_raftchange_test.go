package etcd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/elector/electortest"
)

// Fault tests of a raft leader change that etcd's lease extension does not
// cover (issue 22). etcd keeps a lease's expiry only in the raft leader's
// lessor; renewals are not replicated. A raft leader cut off from its
// peers keeps acknowledging renewals until raft's CheckQuorum makes it step
// down, one to two election timeouts after the cut (its ensureLeadership
// is skipped while its own ticks run). A new raft leader extends every
// lease by one election timeout from the moment it leads (lessor.Promote):
// the lease ends there at P + TTL + ET, P the promotion. A renewal sent at
// s and acknowledged by the old raft leader earns the electd leader the
// deadline s + window(TTL), beyond that end once s > P + ET + TTL·1% + ε:
// the store grants the successor while the old term is still valid.
//
// In both tests candidate a dials only the raft leader, m0, and renews
// every pinnedRenew, so that its renewals keep reaching m0 for as long as
// m0 acknowledges them; candidate b dials the two other members and waits
// at the head of the queue. The terms are recorded (electortest.Terms):
// Stop fails the test if two overlapped.

// TestClusterTransferThenCut: raft leadership is moved from m0 to m1
// (MoveLeader, as operators and automation do before maintenance), and m0
// is cut from its peers as soon as m1 leads, before m0 hears of m1's term
// (m0's peer links are slowed by transferDelay to leave room for that).
// m1 campaigns at once on the transfer, and its lease extension starts
// then: the lease ends on m1 at about cut + TTL + ET. m0, still raft leader
// in its own eyes, acknowledges a's renewals until CheckQuorum, up to
// 2 ET after the cut; each earns a a deadline a window after its send
// time. Asserted, exactly: b's term begins after a's has ended, both Done
// and ValidUntil (as Terms.Stop checks every pair; this names the
// figures of the pair the fault made). Logged: when a's last credited
// renewal was sent, relative to the cut, and a's last ValidUntil against
// b's start.
func TestClusterTransferThenCut(t *testing.T) {
	h := newClusterHarness(t)
	overlaps, placed := 0, 0 // trials: with an overlap; where m0 had not heard of m1's term at the cut
	for i := range raftTrials {
		t.Run(fmt.Sprintf("trial %d", i+1), func(t *testing.T) {
			s := h.pinnedToRaftLeader(t)
			m0, m1 := s.m[0], s.m[1]
			high := highWater(t, s.lead.Term)
			r := h.transferThenCut(t, m0, m1, func(err error) {
				if err != nil {
					t.Fatalf("move the raft leader from m%d to m%d: %v", m0, m1, err)
				}
			})
			cut := r.cut
			since := func(at time.Time) time.Duration { return elapsed(at.Sub(cut)) }
			// Whether m0 had heard of m1's term by the cut: if it had, it
			// stepped down, and this trial did not place the fault.
			heard := r.heard(h)
			if heard == "false" {
				placed++
			}

			next, vu := succeeded(t, s.terms, s.lead, cut, high)
			spans, old, nxt, moveErr := r.end(t, h, s.terms, s.lead, next)
			if nxt.ID != "b" {
				t.Errorf("after the cut %s (token %d) led, want b", nxt.ID, nxt.Token)
			}
			if !old.End.Before(nxt.Start) || !old.ValidUntil.Before(nxt.Start) {
				overlaps++
				t.Errorf("terms overlap: b (token %d) led at cut+%s, %s before a's term (token %d) ended (cut+%s) and %s before its ValidUntil (cut+%s); a's last credited renewal was sent at cut+%s",
					nxt.Token, since(nxt.Start), elapsed(old.End.Sub(nxt.Start)), old.Token, since(old.End),
					elapsed(old.ValidUntil.Sub(nxt.Start)), since(old.ValidUntil), since(vu.Add(-window(faultTTL))))
			}
			t.Logf("MoveLeader m%d→m%d asked at cut%v, m%d led after cut%v (its lease extension ends about cut+%s); m%d cut off at 0, had heard of m%d's term: %s; "+
				"a's last credited renewal sent at cut+%s, a valid until cut+%s, its term ended at cut+%s (%v); b led at cut+%s (b's start − a's ValidUntil: %s); MoveLeader: %v; a's errors %v, b's %v; %d terms",
				m0, m1, since(r.asked), m1, since(r.before), since(cut.Add(faultTTL+promoteExtend)), m0, m1, heard,
				since(vu.Add(-window(faultTTL))), since(vu), since(old.End), old.Err, since(nxt.Start), elapsed(nxt.Start.Sub(old.ValidUntil)),
				moveErr, s.a.errs.snapshot(), s.b.errs.snapshot(), len(spans))
		})
	}
	t.Logf("terms overlapped in %d of %d trials; the cut came before m0 heard of m1's term in %d", overlaps, raftTrials, placed)
}

// TestClusterRaftLeaderCutPinned: the raft leader m0, which a's renewals
// are pinned to, is cut from its peers at cut, with no transfer. Until
// then heartbeats reached the followers: no new raft leader is elected
// before cut, so its lease extension ends no earlier than cut + TTL + ET
// (ET = promoteExtend, the cluster's election timeout). Asserted: a's
// ValidUntil, sampled until its term ends, never passes cut + TTL + ET.
// That is the exact bound: any later deadline can outlast the lease on a
// new raft leader elected just after the cut (as after a transfer,
// TestClusterTransferThenCut), whether or not this trial's election came
// late enough to hide it. m0 acknowledges renewals until it steps down,
// 1–2 ET after the cut (later on a loaded host, its ticks late), so today
// the bound is passed whenever a renewal sent later than ET + TTL·1% + ε
// after the cut is acknowledged.
//
// Asserted too, the rule electd keeps (renewal.go): no renewal sent after
// the cut is credited, so a's ValidUntil never passes cut + window, the
// deadline of a renewal sent at the cut. A renewal counts only once a
// linearizable read through m0 in the same raft term confirms that a
// quorum still followed m0 after it served the renewal, and m0 reaches no
// quorum after the cut. (A fix that shortened the window by the election
// timeout instead would keep the first bound, not this one.) Also logged:
// when the followers elected a raft leader, and b's start against a's
// ValidUntil (Terms.Stop fails the test on an overlap).
func TestClusterRaftLeaderCutPinned(t *testing.T) {
	h := newClusterHarness(t)
	for i := range raftTrials {
		t.Run(fmt.Sprintf("trial %d", i+1), func(t *testing.T) {
			s := h.pinnedToRaftLeader(t)
			m0 := s.m[0]
			t.Cleanup(func() { h.c.Heal(m0) })
			high := highWater(t, s.lead.Term)
			cut := time.Now()
			h.c.Partition(m0)
			cutDone := time.Now() // no renewal sent later can be confirmed by a quorum
			since := func(at time.Time) time.Duration { return elapsed(at.Sub(cut)) }

			r, elected := h.raftElected(t, m0)
			next, vu := succeeded(t, s.terms, s.lead, cut, high)
			h.heal(t, m0)
			spans := s.terms.Stop(t)
			nxt := electortest.SpanOf(t, spans, next.Token)

			bound := cut.Add(faultTTL + promoteExtend)
			if sent := cutDone.Add(window(faultTTL)); vu.After(sent) {
				t.Errorf("a was valid until cut+%s, %s past cut+window (%s): a renewal sent after the cut was credited (sent at cut+%s)",
					since(vu), elapsed(vu.Sub(sent)), since(sent), since(vu.Add(-window(faultTTL))))
			}
			if vu.After(bound) {
				t.Errorf("a was valid until cut+%s, %s past cut+TTL+ET (%s), the earliest end of the lease on a raft leader elected after the cut: m%d acknowledged a renewal sent at cut+%s",
					since(vu), elapsed(vu.Sub(bound)), since(bound), m0, since(vu.Add(-window(faultTTL))))
			}
			t.Logf("m%d (raft leader) cut off at 0: a's last credited renewal sent at cut+%s, a valid until cut+%s: %s past cut+window (%s), %s past cut+TTL+ET (%s); "+
				"m%d led raft at cut+%s (its lease extension ends about cut+%s; that − a's ValidUntil: %s); %s (token %d) led at cut+%s (its start − a's ValidUntil: %s); a's errors %v; %d terms",
				m0, since(vu.Add(-window(faultTTL))), since(vu), elapsed(vu.Sub(cutDone.Add(window(faultTTL)))), since(cutDone.Add(window(faultTTL))),
				elapsed(vu.Sub(bound)), since(bound), r, since(elected), since(elected.Add(faultTTL+promoteExtend)),
				elapsed(elected.Add(faultTTL+promoteExtend).Sub(vu)), nxt.ID, nxt.Token, since(nxt.Start), elapsed(nxt.Start.Sub(vu)),
				s.a.errs.snapshot(), len(spans))
		})
	}
}
