package etcd_test

import (
	"fmt"
	"testing"
	"time"
)

// TestClusterRaftLeaderMovesKeepTerm: liveness of the renewal rule
// (renewal.go) across graceful raft leader changes. Raft leadership is
// moved round the three members (MoveLeader, as operators and automation
// do before maintenance) many times while a leads, dialling every member.
// Each move changes the raft term under a's pinned member: the renewal in
// flight may fail ("leader changed") or be refused by its proof (the term
// changed), and the next must count. Asserted: a's term survives every
// move, a renewal is credited after each, and no other term begins. Logged:
// the least of a's deadline left at any time.
func TestClusterRaftLeaderMovesKeepTerm(t *testing.T) {
	const moves = 12
	h := newClusterHarness(t)
	cands := h.candidates(t, allMembers, faultTTL, "a", "b")
	terms := cands.loop(t)
	lead := terms.WaitLeading(t, firstLeader)
	renewed(t, lead.Term)
	low := lowWater(t, lead.Term)
	start := time.Now()
	for i := range moves {
		from := h.c.Leader(t)
		h.moveRaftLeader(t, (from+1)%3)
		renewed(t, lead.Term)
		stillLeads(t, terms, lead, fmt.Sprintf("after move %d (m%d → m%d)", i+1, from, (from+1)%3))
	}
	least := low()
	spans := terms.Stop(t)
	t.Logf("%d raft leader moves in %s: %s kept its term (token %d); least deadline left: %s (window %s); %s's errors %v; %d terms",
		moves, elapsed(time.Since(start)), lead.ID, lead.Token, elapsed(least), window(faultTTL), lead.ID, cands[lead.ID].errs.snapshot(), len(spans))
}
