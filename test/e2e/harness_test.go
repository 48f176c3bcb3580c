package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

const (
	leaderTimeout = 15 * time.Second // a leader with a running child, from any state
	goneTimeout   = time.Second      // a killed electd's child disappears
)

// harness is one scenario: an election of its own (Name), a record log
// shared by all its children, and the electd processes it started.
type harness struct {
	*kit.Scenario
	s *kit.Store
}

// newHarness prepares a scenario on s. At cleanup it kills every electd,
// checks that their children died with them (Pdeathsig) and kills any
// leftover, checks the record log, and on failure prints the logs.
func newHarness(t *testing.T, s *kit.Store) *harness {
	sc := kit.NewScenario(t, s, "e2e-", bin.Recorder, goneTimeout)
	sc.Verify = func(lg record.Log) error { return lg.Check(record.Options{AllowRestarts: true}) }
	return &harness{Scenario: sc, s: s}
}

// waitLeader waits until every running node's /leader names the same
// leader and token, that node's /readyz is 200, and its child (with that
// token) is recorded as running and alive. It returns the leader and the
// child's run.
func (h *harness) waitLeader(nodes ...*node) (*node, record.Run) {
	h.T.Helper()
	var (
		lead *node
		run  record.Run
	)
	h.Poll(leaderTimeout, "one agreed leader with a running child", func() (bool, string) {
		var id string
		var token uint64
		for _, n := range nodes {
			if n.Exited() {
				continue
			}
			d, code, err := n.Leader()
			if err != nil || code != 200 || d.Leader == nil {
				return false, fmt.Sprintf("%s: /leader %d %v", n.ID, code, err)
			}
			if id == "" {
				id, token = d.Leader.ID, d.Leader.FencingToken
			} else if d.Leader.ID != id || d.Leader.FencingToken != token {
				return false, fmt.Sprintf("%s sees %s/%d, another node %s/%d", n.ID, d.Leader.ID, d.Leader.FencingToken, id, token)
			}
		}
		lead = nil
		for _, n := range nodes {
			if n.ID == id && !n.Exited() {
				lead = n
			}
		}
		if lead == nil {
			return false, fmt.Sprintf("leader %q is not a running node", id)
		}
		if code := lead.Readyz(); code != 200 {
			return false, fmt.Sprintf("leader %s: /readyz %d", id, code)
		}
		for _, r := range h.Runs() {
			if r.Node == id && r.Token == token && !r.Ended() && proc.Alive(r.Pid) {
				run = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("no running child of %s with token %d", id, token)
	})
	return lead, run
}

// waitFollower waits until n's /leader names leader (n has joined and
// watches the election).
func (h *harness) waitFollower(n *node, leader string) {
	h.T.Helper()
	h.Poll(leaderTimeout, n.ID+" sees leader "+leader, func() (bool, string) {
		d, code, err := n.Leader()
		if err != nil || d.Leader == nil {
			return false, fmt.Sprintf("/leader %d %v", code, err)
		}
		return d.Leader.ID == leader && !d.Self.Leader, fmt.Sprintf("leader %s, self leader %v", d.Leader.ID, d.Self.Leader)
	})
}

// nextRun waits for the first run that starts after prev with a higher
// token, on a node other than prev's, and returns it.
func (h *harness) nextRun(prev record.Run, within time.Duration) record.Run {
	h.T.Helper()
	return h.WaitRun(within, "the next child after "+prev.String(), func(r record.Run) bool {
		return r.Start.After(prev.Start) && r.Node != prev.Node && r.Token > prev.Token
	})
}

// direct are the options of a node that talks to the store directly,
// with more's args and env added and their nobody and host kept.
func (h *harness) direct(more ...nodeOpts) nodeOpts {
	o := nodeOpts{dial: h.s.Direct()}
	for _, m := range more {
		o.args = append(o.args, m.args...)
		o.env = append(o.env, m.env...)
		o.nobody = o.nobody || m.nobody
		if m.host != "" {
			o.host = m.host
		}
	}
	return o
}

// leaderAndFollower starts n1 and waits until it leads with its child
// running, then starts n2 and waits until it follows n1. Both get o.
func (h *harness) leaderAndFollower(o nodeOpts) (lead, follower *node, run record.Run) {
	h.T.Helper()
	lead = h.startNode("n1", o)
	_, run = h.waitLeader(lead)
	follower = h.startNode("n2", o)
	h.waitFollower(follower, lead.ID)
	return lead, follower, run
}

// leaderThrough is leaderAndFollower with the leader reaching the store
// through l, the follower directly.
func (h *harness) leaderThrough(l *kit.Link) (lead, follower *node, run record.Run) {
	h.T.Helper()
	lead = h.startNode("n1", through(l))
	_, run = h.waitLeader(lead)
	follower = h.startNode("n2", h.direct())
	h.waitFollower(follower, lead.ID)
	return lead, follower, run
}

// checkOneChild checks the record log, and that one child ran: the term
// held.
func (h *harness) checkOneChild() {
	h.T.Helper()
	if runs := h.Check(record.Options{}); len(runs) != 1 {
		h.T.Fatalf("%d children ran, want 1:\n%s", len(runs), kit.Describe(runs))
	}
}

// checkCutOff cuts lead, whose child is run, off the store (cut), and
// checks that its child stops on its own deadline, before the follower's
// starts (kit.CheckCutOff); after heal, lead follows and the new child
// still runs. Then it checks the record log.
func (h *harness) checkCutOff(lead, follower *node, run record.Run, cut, heal func()) {
	h.T.Helper()
	at := time.Now()
	cut()
	next := h.nextRun(run, leaderTimeout)
	kit.CheckCutOff(h.T, at, ttl, h.RunOf(run.Pid), next)
	heal()
	h.waitFollower(lead, follower.ID)
	if _, now := h.waitLeader(lead, follower); now.Pid != next.Pid {
		h.T.Fatalf("after the heal the leader's child is %s, want %s", now, next)
	}
	h.Check(record.Options{})
}
