package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// harness is one scenario: an election of its own, a record log shared by
// all its children, and the electd processes it started.
type harness struct {
	t        *testing.T
	s        *kit.Store
	election string
	dir      string
	logPath  string
	nodes    []*node
}

// newHarness prepares a scenario on s. At cleanup it kills every electd,
// checks that their children died with them (Pdeathsig) and kills any
// leftover, checks the record log, and on failure prints the logs.
func newHarness(t *testing.T, s *kit.Store) *harness {
	dir := t.TempDir()
	h := &harness{
		t: t, s: s, dir: dir,
		election: "e2e-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()),
		logPath:  filepath.Join(dir, "record.log"),
	}
	t.Cleanup(h.cleanup)
	return h
}

func (h *harness) cleanup() {
	t := h.t
	for _, n := range h.nodes {
		n.kill()
		if b, err := os.ReadFile(n.logPath); err == nil {
			for _, bad := range proc.Crashes(string(b)) {
				t.Errorf("%s's output contains %q (see its log below)", n.id, bad)
			}
		}
	}
	lg, err := record.ReadAll(h.logPath)
	if err != nil {
		t.Errorf("record log: %v", err)
	}
	runs := lg.Runs
	for _, r := range runs {
		if !proc.WaitGone(r.Pid, goneTimeout) && proc.IsOurs(r.Pid, bin.Recorder) {
			t.Errorf("child %s outlived its electd (SIGKILLed) by %s; killing it", r, goneTimeout)
			_ = syscall.Kill(r.Pid, syscall.SIGKILL)
		}
		for _, gc := range r.Grandchildren {
			if proc.Alive(gc) && proc.IsOurs(gc, "sleep") {
				t.Logf("grandchild %d of %s is still alive after its electd was SIGKILLed; killing it", gc, r)
				_ = syscall.Kill(gc, syscall.SIGKILL)
			}
		}
	}
	// Workers (RECORD_WORKERS) that survived a kill -9 of electd, as they
	// do outside a PID namespace.
	h.killWorkers(runs)
	if err == nil {
		if cerr := lg.Check(record.Options{AllowRestarts: true}); cerr != nil {
			t.Errorf("record log %s:\n%v", h.logPath, cerr)
		}
	}
	if t.Failed() {
		for _, n := range h.nodes {
			t.Log(n.tail())
		}
		t.Logf("runs in %s:\n%s", h.logPath, kit.Describe(runs))
	}
}

// runs reads the record log, failing the test if it does not parse.
func (h *harness) runs() []record.Run { h.t.Helper(); return kit.Runs(h.t, h.logPath) }

// check proves the record log safe so far.
func (h *harness) check(opt record.Options) []record.Run {
	h.t.Helper()
	return kit.Check(h.t, h.logPath, opt)
}

// poll is kit.Poll on the harness's test.
func (h *harness) poll(within time.Duration, what string, cond func() (bool, string)) {
	h.t.Helper()
	kit.Poll(h.t, within, what, cond)
}

// waitRun waits for a run matching match and returns it.
func (h *harness) waitRun(within time.Duration, what string, match func(record.Run) bool) record.Run {
	h.t.Helper()
	var found record.Run
	h.poll(within, what, func() (bool, string) {
		runs := h.runs()
		for _, r := range runs {
			if match(r) {
				found = r
				return true, ""
			}
		}
		return false, "runs:\n" + kit.Describe(runs)
	})
	return found
}

// waitLeader waits until every running node's /leader names the same
// leader and token, that node's /readyz is 200, and its child (with that
// token) is recorded as running and alive. It returns the leader and the
// child's run.
func (h *harness) waitLeader(nodes ...*node) (*node, record.Run) {
	h.t.Helper()
	var (
		lead *node
		run  record.Run
	)
	h.poll(leaderTimeout, "one agreed leader with a running child", func() (bool, string) {
		var id string
		var token uint64
		for _, n := range nodes {
			if n.Exited() {
				continue
			}
			d, code, err := n.leader()
			if err != nil || code != 200 || d.Leader == nil {
				return false, fmt.Sprintf("%s: /leader %d %v", n.id, code, err)
			}
			if id == "" {
				id, token = d.Leader.ID, d.Leader.FencingToken
			} else if d.Leader.ID != id || d.Leader.FencingToken != token {
				return false, fmt.Sprintf("%s sees %s/%d, another node %s/%d", n.id, d.Leader.ID, d.Leader.FencingToken, id, token)
			}
		}
		lead = nil
		for _, n := range nodes {
			if n.id == id && !n.Exited() {
				lead = n
			}
		}
		if lead == nil {
			return false, fmt.Sprintf("leader %q is not a running node", id)
		}
		if code := lead.readyz(); code != 200 {
			return false, fmt.Sprintf("leader %s: /readyz %d", id, code)
		}
		for _, r := range h.runs() {
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
	h.t.Helper()
	h.poll(leaderTimeout, n.id+" sees leader "+leader, func() (bool, string) {
		d, code, err := n.leader()
		if err != nil || d.Leader == nil {
			return false, fmt.Sprintf("/leader %d %v", code, err)
		}
		return d.Leader.ID == leader && !d.Self.Leader, fmt.Sprintf("leader %s, self leader %v", d.Leader.ID, d.Self.Leader)
	})
}

// nextRun waits for the first run that starts after prev with a higher
// token, on a node other than prev's, and returns it.
func (h *harness) nextRun(prev record.Run, within time.Duration) record.Run {
	h.t.Helper()
	return h.waitRun(within, "the next child after "+prev.String(), func(r record.Run) bool {
		return r.Start.After(prev.Start) && r.Node != prev.Node && r.Token > prev.Token
	})
}

// runOf returns the current state of the run with pid.
func (h *harness) runOf(pid int) record.Run { h.t.Helper(); return kit.RunOf(h.t, h.logPath, pid) }

// ms renders a duration in milliseconds for logs.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// direct are the options of a node that talks to the store directly.
func (h *harness) direct(more ...nodeOpts) nodeOpts {
	o := nodeOpts{store: h.s.URL(h.s.Addr)}
	for _, m := range more {
		o.args = append(o.args, m.args...)
		o.env = append(o.env, m.env...)
	}
	return o
}

// leaderAndFollower starts n1 and waits until it leads with its child
// running, then starts n2 and waits until it follows n1. Both get o.
func (h *harness) leaderAndFollower(o nodeOpts) (lead, follower *node, run record.Run) {
	h.t.Helper()
	lead = h.startNode("n1", o)
	_, run = h.waitLeader(lead)
	follower = h.startNode("n2", o)
	h.waitFollower(follower, lead.id)
	return lead, follower, run
}

// hold fails the test unless cond holds at every poll for d: a stability
// check, not a synchronisation.
func (h *harness) hold(d time.Duration, what string, cond func() (bool, string)) {
	h.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if ok, status := cond(); !ok {
			h.t.Fatalf("%s: stopped holding after %s: %s", what, d-time.Until(end), status)
		}
		time.Sleep(kit.PollEvery)
	}
}
