package e2e

import (
	"fmt"
	"testing"

	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// testQuorum: on a Redlock quorum of three servers a term needs two. A
// leader that loses one server (killed, then back empty; or its own link
// to it cut) keeps its term and its child; one cut off from two while it
// still reaches the third stops its child by its own deadline, before the
// other copy's child starts, and follows the new leader after the heal.
func testQuorum(t *testing.T, s *kit.Store) {
	rl, ok := kit.As[*testenv.Redlock](s)
	if !ok {
		t.Skip("a quorum's faults: only a Redlock quorum has servers to lose one by one")
	}
	if rl.Len() != 3 {
		t.Skipf("written for three servers, the store has %d", rl.Len())
	}
	// sameChild holds while run's child is the only one running.
	sameChild := func(h *harness, run record.Run) func() (bool, string) {
		return func() (bool, string) {
			var running []string
			for _, r := range h.Runs() {
				if !r.Ended() && proc.Alive(r.Pid) {
					running = append(running, r.String())
				}
			}
			ok := len(running) == 1 && proc.Alive(run.Pid) && !h.RunOf(run.Pid).Ended()
			return ok, fmt.Sprintf("running: %v, want only %s", running, run)
		}
	}

	t.Run("server-down", func(t *testing.T) {
		h := newHarness(t, s)
		_, _, run := h.leaderAndFollower(h.direct())
		t.Cleanup(func() { // for the scenarios after this one, if it failed
			if rl.Server(0).Pid() == 0 {
				rl.Start(t, 0)
			}
		})
		rl.Kill(t, 0)
		// Longer than the TTL: only renewals on the other two keep it.
		h.Hold(ttl+ttl/2, "the leader's child alone, one server down", sameChild(h, run))
		rl.Start(t, 0) // back empty: it grants nothing for one TTL, then takes the leader back
		h.Hold(ttl+ttl/2, "the leader's child alone, the server back empty", sameChild(h, run))
		h.checkOneChild()
	})

	t.Run("cut-from-one", func(t *testing.T) {
		h := newHarness(t, s)
		l := s.Link(t)
		n1, n2, run := h.leaderThrough(l)
		l.Proxies[1].Cut()
		h.Hold(ttl+ttl/2, "the leader's child alone, cut from one server", sameChild(h, run))
		l.Proxies[1].Heal()
		h.waitLeader(n1, n2)
		h.checkOneChild()
	})

	t.Run("cut-from-two", func(t *testing.T) {
		h := newHarness(t, s)
		l := s.Link(t)
		n1, n2, run := h.leaderThrough(l)
		h.checkCutOff(n1, n2, run, func() {
			l.Proxies[0].Cut()
			l.Proxies[2].Cut() // it still reaches server 1, a minority
		}, l.Heal)
	})
}
