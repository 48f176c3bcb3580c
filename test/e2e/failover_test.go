package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// testThreeCopies: of three copies exactly one runs its child, all agree on
// who leads and with which token, only the leader is ready, and the term
// survives its own TTL (renewals work).
func testThreeCopies(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	nodes := []*node{h.startNode("n1", h.direct()), h.startNode("n2", h.direct()), h.startNode("n3", h.direct())}
	lead, run := h.waitLeader(nodes...)
	t.Logf("leader %s, token %d, child pid %d", lead.ID, run.Token, run.Pid)

	state := func() (bool, string) {
		running := 0
		for _, r := range h.Runs() {
			if !r.Ended() && proc.Alive(r.Pid) {
				running++
			}
		}
		if running != 1 {
			return false, fmt.Sprintf("%d children running", running)
		}
		if !proc.Alive(run.Pid) {
			return false, fmt.Sprintf("the leader's child %d is gone", run.Pid)
		}
		ready := 0
		for _, n := range nodes {
			d, code, err := n.Leader()
			if err != nil || code != http.StatusOK || d.Leader == nil {
				return false, fmt.Sprintf("%s: /leader %d %v", n.ID, code, err)
			}
			if d.Leader.ID != lead.ID || d.Leader.FencingToken != run.Token {
				return false, fmt.Sprintf("%s: /leader says %s token %d", n.ID, d.Leader.ID, d.Leader.FencingToken)
			}
			if d.Self.Leader != (n == lead) {
				return false, fmt.Sprintf("%s: self.leader %v", n.ID, d.Self.Leader)
			}
			switch code := n.Readyz(); {
			case code == http.StatusOK && n == lead:
				ready++
			case code == http.StatusOK:
				return false, fmt.Sprintf("follower %s: /readyz 200", n.ID)
			case code != http.StatusServiceUnavailable:
				return false, fmt.Sprintf("%s: /readyz %d", n.ID, code)
			}
		}
		return ready == 1, fmt.Sprintf("%d copies ready", ready)
	}
	// Longer than the TTL: only renewals keep the term alive that long.
	h.Hold(ttl+ttl/2, "one leader, one child, one ready copy", state)
	h.checkOneChild()
}

// testSIGTERMLeader: SIGTERM stops the child, resigns and exits 0; the next
// copy's child starts only after the old one stopped.
func testSIGTERMLeader(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	lead, follower, run := h.leaderAndFollower(h.direct())
	sent := time.Now()
	lead.Signal(syscall.SIGTERM)
	if code := lead.WaitExit(exitTimeout); code != 0 {
		t.Fatalf("electd exited with %d after SIGTERM, want 0", code)
	}
	old := h.RunOf(run.Pid)
	if old.Stop.IsZero() {
		t.Fatalf("the leader's child has no stop line after electd exited: %s", old)
	}
	next := h.nextRun(old, leaderTimeout)
	if next.Node != follower.ID {
		t.Fatalf("next child on %s, want %s", next.Node, follower.ID)
	}
	if !old.Stop.Before(next.Start) {
		t.Fatalf("new child started %s before the old one stopped", old.Stop.Sub(next.Start))
	}
	t.Logf("SIGTERM: old child stopped %s after the signal; handover gap old stop -> new start %s (token %d -> %d)",
		kit.Millis(old.Stop.Sub(sent)), kit.Millis(next.Start.Sub(old.Stop)), old.Token, next.Token)
	h.waitLeader(follower)
	h.Check(record.Options{})
}

// testKill9Leader: after kill -9 of the leader's electd its child dies
// (Pdeathsig) within a second, and the next child starts no earlier than the
// old lease could have lapsed on the store.
func testKill9Leader(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	lead, follower, run := h.leaderAndFollower(h.direct())
	killed := time.Now()
	lead.Signal(syscall.SIGKILL)
	if !proc.WaitGone(run.Pid, goneTimeout) {
		t.Fatalf("child %d still alive %s after kill -9 of its electd", run.Pid, goneTimeout)
	}
	childGone := time.Since(killed)
	if code := lead.WaitExit(exitTimeout); code != 128+int(syscall.SIGKILL) {
		t.Errorf("electd exit code %d after kill -9, want 137", code)
	}
	next := h.nextRun(run, leaderTimeout)
	if next.Node != follower.ID {
		t.Fatalf("next child on %s, want %s", next.Node, follower.ID)
	}
	// The last renewal the store saw was at most one renew interval before
	// the kill, so the old lease lasts at least until then.
	earliest := killed.Add(ttl - renewInterval)
	if next.Start.Before(earliest) {
		t.Errorf("next child started %s after the kill, before the old lease could have lapsed (%s after)",
			next.Start.Sub(killed), ttl-renewInterval)
	}
	t.Logf("kill -9: child gone after %s; failover kill -> new child start %s (ttl %s, renew %s, earliest %s)",
		kit.Millis(childGone), kit.Millis(next.Start.Sub(killed)), ttl, renewInterval, ttl-renewInterval)
	h.waitLeader(follower)
	h.Check(record.Options{})
}

// testCutOffLeader: the leader loses the store (a black-holed link: a
// proxy, or for a topology a kernel filter on its sockets); it stops its
// child on its own deadline, before the other copy's child starts. After
// the partition heals it follows the new leader.
func testCutOffLeader(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	px := s.Link(t)
	n1, n2, run := h.leaderThrough(px)
	h.checkCutOff(n1, n2, run, px.Cut, px.Heal)
}

// testResignEndpoint: POST /resign from loopback hands over at once, with and
// without --admin-token. (A non-loopback caller cannot be made without a
// network namespace; its 403 and the bearer token are covered by health's
// unit tests.)
func testResignEndpoint(t *testing.T, s *kit.Store) {
	tests := []struct {
		name string
		args []string
	}{
		{"loopback", nil},
		{"loopback-with-admin-token", []string{"--admin-token", "secret-0123456789abcdef"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, s)
			lead, follower, run := h.leaderAndFollower(h.direct(nodeOpts{args: tt.args}))
			if code, body, err := follower.Do(http.MethodPost, "/resign", ""); err != nil || code != http.StatusConflict {
				t.Errorf("POST /resign to the follower: %d %s %v, want 409", code, body, err)
			}
			sent := time.Now()
			code, body, err := lead.Do(http.MethodPost, "/resign", "")
			if err != nil || code != http.StatusOK {
				t.Fatalf("POST /resign to the leader: %d %s %v, want 200", code, body, err)
			}
			var res struct{ Resigned bool }
			if err := json.Unmarshal(body, &res); err != nil || !res.Resigned {
				t.Errorf("POST /resign body %s, want resigned true", body)
			}
			// /resign answers once the term is given up: the child has stopped.
			old := h.RunOf(run.Pid)
			if old.Stop.IsZero() || proc.Alive(old.Pid) {
				t.Fatalf("/resign answered 200 while the child still runs: %s", old)
			}
			next := h.nextRun(old, leaderTimeout)
			if next.Node != follower.ID || !old.Stop.Before(next.Start) {
				t.Fatalf("next child %s, after %s", next, old)
			}
			t.Logf("resign: old child stopped %s after the POST; handover gap old stop -> new start %s (token %d -> %d)",
				kit.Millis(old.Stop.Sub(sent)), kit.Millis(next.Start.Sub(old.Stop)), old.Token, next.Token)
			if newLead, _ := h.waitLeader(lead, follower); newLead != follower {
				t.Fatalf("leader %s after the resignation, want %s", newLead.ID, follower.ID)
			}
			h.Check(record.Options{})
		})
	}
}

// testStoreRestart: the store is killed under a leader and started again
// (etcd on its data dir, Redis empty), at once or only after the leader had
// to stop its child on its own deadline. Whatever each backend does
// meanwhile, no two children overlap, tokens grow, and a leader runs its
// child again.
func testStoreRestart(t *testing.T, s *kit.Store) {
	tests := []struct {
		name       string
		outlastTTL bool // keep the store down until the leader stopped its child
	}{
		{"at-once", false},
		{"after-the-lease", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, s)
			lead, follower, run := h.leaderAndFollower(h.direct())
			killed := time.Now()
			s.Kill(t)
			if tt.outlastTTL {
				h.WaitRun(ttl+time.Second, "the cut-off leader stopping its child", func(r record.Run) bool {
					return r.Pid == run.Pid && r.Ended()
				})
				if stopped := h.RunOf(run.Pid).End().Sub(killed); stopped >= ttl {
					t.Errorf("child stopped %s after the store died, past any lease deadline", stopped)
				}
			}
			s.Start(t)
			back := time.Since(killed)
			// Through the aftermath (a leader that learns its lease is gone
			// stops its child), never two children at once.
			h.Hold(2*ttl, "at most one child running", func() (bool, string) {
				var running []string
				for _, r := range h.Runs() {
					if !r.Ended() && proc.Alive(r.Pid) {
						running = append(running, r.String())
					}
				}
				return len(running) <= 1, fmt.Sprintf("running: %v", running)
			})
			newLead, now := h.waitLeader(lead, follower)
			old := h.RunOf(run.Pid)
			if now.Pid == run.Pid {
				t.Logf("store down %s: %s kept its term and its child", kit.Millis(back), lead.ID)
			} else {
				t.Logf("store down %s: old child ended %s after the kill; %s's child started %s after the kill (token %d -> %d)",
					kit.Millis(back), kit.Millis(old.End().Sub(killed)), newLead.ID, kit.Millis(now.Start.Sub(killed)), run.Token, now.Token)
			}
			h.Check(record.Options{})
		})
	}
}
