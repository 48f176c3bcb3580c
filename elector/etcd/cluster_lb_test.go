package etcd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector/electortest"
)

// TestClusterBalancedEndpointStaleLeader: electd reaches the cluster
// through one address that balances connections over the members (an
// etcd gateway, a Kubernetes Service, HAProxy, a DNS name with an address
// per member: --store etcd://gateway:23790). The renewal rule
// (renewal.go) proves a renewal only if the raft term it calls `before`
// was reported by the member that then serves the renewal; electd takes
// "the same connection" (pin) for "the same member" and never compares the
// member id that every answer's header carries. Behind a balancer a pin's
// connection reaches another member after each reconnect, and the proof
// falls apart:
//
//   - raft leadership moves from m0 to m1 and m0 is cut off from its
//     peers before it hears of m1's term (as in TestClusterTransferThenCut);
//     m1 leads term T+1 and extends a's lease from then, by TTL + ET;
//   - a's pin reaches m2, which follows m1: its answers carry T+1, so the
//     pin's term is T+1;
//   - a's pin connection breaks and is connected again, through the
//     balancer, to m0: a's next renewal takes before = T+1 (the pin's
//     term, from m2), and m0, still raft leader of T in its own eyes,
//     acknowledges it from its own lessor, more than an election timeout
//     after m1's extension began: nothing on m1 covers it;
//   - the connection breaks again (the balancer sends the read to m2): the
//     proof's linearizable read is served in T+1 and says T+1 = before,
//     so the renewal counts, from its send time.
//
// a's deadline is then later than the end of its lease on m1, which b,
// the head waiter on m1 and m2, sees expire: b leads while a's term is
// still valid (5 of 6 trials before the fix). The fix: every answer of a
// proof must name the same member (renewal.go's mark), so m0's answer,
// marked m0, never matches a `before` from m2. Asserted: the terms did not
// overlap (and Terms.Stop checks every pair). A renewal sent after the
// switch may still be credited, but only one served through m2 (which
// follows m1, whose lessor renews the lease): the connection to m0 is
// closed once m0 answered, so no read through m0 can prove m0's answer;
// it is logged.
// The balancer here is adversarial in its timing only: which member a
// new connection reaches, and when a connection ends, are what real
// balancers and gateways decide (round robin, idle timeouts, draining,
// health checks).
func TestClusterBalancedEndpointStaleLeader(t *testing.T) {
	h := newClusterHarness(t)
	const (
		renewEvery = 200 * time.Millisecond
		// switchAt is when, after the cut, the balancer moves a's pin to
		// m0: late enough that a renewal sent then is not covered by m1's
		// extension (it must be sent more than ET + TTL·1% + ε after m1
		// led), early enough that m0 has not yet stepped down (CheckQuorum:
		// one to two election timeouts after the cut; measured 0.79–0.89 s).
		switchAt = 600 * time.Millisecond
	)
	credited, placed, overlaps := 0, 0, 0
	for i := range raftTrials {
		t.Run(fmt.Sprintf("trial %d", i+1), func(t *testing.T) {
			ctx := context.Background()
			m0 := h.c.Leader(t)
			m1, m2 := (m0+1)%3, (m0+2)%3
			ep := func(m int) string { return h.c.Members()[m].Endpoint() }
			toM2 := lbRoute{name: fmt.Sprintf("m%d", m2), to: ep(m2)}
			lb := startMemberLB(t, toM2)

			a, terms, lead := h.balancedLeadsBQueued(t, lb, -1, renewEvery, m0, m1, m2)

			high := highWater(t, lead.Term)
			// Transfer, then cut m0 off before it hears of m1's term.
			r := h.transferThenCut(t, m0, m1, nil)
			cut, term0 := r.cut, r.term0
			since := func(at time.Time) time.Duration { return elapsed(at.Sub(cut)) }
			heard := r.heard(h)

			// m2 applies m1's first entry; a renewal a sends through m2
			// after that is answered with m1's term, which becomes the
			// pin's.
			var applied time.Time
			electortest.Eventually(t, raftElection+slack, fmt.Sprintf("m%d to apply m%d's term", m2, m1), func() bool {
				st, err := h.c.Status(ctx, m2)
				applied = time.Now()
				return err == nil && st.Header.RaftTerm > term0
			})
			electortest.Eventually(t, window(faultTTL), "a renewal through m2 in m1's term", func() bool {
				return lead.Term.ValidUntil().After(applied.Add(window(faultTTL)))
			})
			// From now on a reaches no member until the balancer moves its
			// pin: the pin's term stays m1's (nothing answers), and a's
			// client (its watch on its own key) hears nothing either, as
			// for a host cut off from the balancer from here on. a's
			// term then lasts until its deadline, whatever the store does
			// meanwhile: the promise may not rest on the leader seeing its
			// key go.
			lb.Hold(0)
			held := time.Now()

			// The move: the pin's next connection goes to m0, and is closed
			// once m0 has answered the renewal on it; the one after goes
			// to m2 (the proof's read) and is held silent once the read is
			// answered; every later one is held silent.
			if d := time.Until(cut.Add(switchAt)); d > 0 {
				<-time.After(d) // placing the fault, not synchronising
			}
			lb.Plan(lbRoute{name: "nowhere"},
				lbRoute{name: fmt.Sprintf("m%d (cut off)", m0), to: ep(m0), steps: []lbStep{{firstData, lbClose}}},
				lbRoute{name: fmt.Sprintf("m%d (read)", m2), to: ep(m2), steps: []lbStep{{endOfStream, lbHold}}},
			)
			lb.Drop(pinConn)
			switched := time.Now()

			next, vu := succeeded(t, terms, lead, cut, high)
			_, old, nxt, err := r.end(t, h, terms, lead, next)
			if err != nil {
				t.Logf("MoveLeader: %v", err)
			}

			sent := vu.Add(-window(faultTTL)) // a's last credited renewal
			servedByM0 := false
			for _, l := range lb.Log() {
				if strings.Contains(l, fmt.Sprintf("(m%d (cut off)): answer relayed", m0)) {
					servedByM0 = true
				}
			}
			if servedByM0 {
				placed++
			}
			if sent.After(switched) {
				credited++
				t.Logf("a renewal a sent at cut+%s, after the balancer moved a's pin (cut+%s), was credited (through m%d: m%d's answers cannot be proved): a valid until cut+%s",
					since(sent), since(switched), m2, m0, since(vu))
			}
			if !old.End.Before(nxt.Start) || !old.ValidUntil.Before(nxt.Start) {
				overlaps++
				t.Errorf("terms overlap: %s (token %d) led at cut+%s, %s before a's ValidUntil (cut+%s); a's last credited renewal was sent at cut+%s, after the balancer moved a's pin at cut+%s",
					nxt.ID, nxt.Token, since(nxt.Start), elapsed(old.ValidUntil.Sub(nxt.Start)), since(old.ValidUntil), since(sent), since(switched))
			}
			t.Logf("m%d cut off at 0 (had heard of m%d's term: %s), m%d led after cut%s, m%d applied it by cut+%s; a's pin held at cut+%s, moved to m%d at cut+%s; "+
				"a's last credited renewal sent at cut+%s, valid until cut+%s, term ended at cut+%s (%v); %s (token %d) led at cut+%s (its start − a's ValidUntil: %s); "+
				"a's errors %v; balancer: %v",
				m0, m1, heard, m1, since(r.before), m2, since(applied), since(held), m0, since(switched),
				since(sent), since(vu), since(old.End), old.Err, nxt.ID, nxt.Token, since(nxt.Start), elapsed(nxt.Start.Sub(old.ValidUntil)),
				a.errs.snapshot(), lb.Log())
		})
	}
	t.Logf("m0 answered the renewal in %d of %d trials; a renewal sent after the switch was credited in %d; terms overlapped in %d", placed, raftTrials, credited, overlaps)
}
