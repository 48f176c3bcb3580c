package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/test/e2e/tree"
	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// testSwitchover: three copies, each child a tree whose processes ignore
// SIGTERM (the main process and its workers: one in its group, one in a
// session of its own, one daemon). `electd switchover --to n3` against
// the leader n1: n1's whole tree is gone before n3's child starts, n3
// leads next with a greater token, and n2, queued ahead of n3, did not
// lead in between and leads after n3. Refusals change nothing: a
// candidate that is not queued, and a copy that does not lead (its answer
// names the leader).
func testSwitchover(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	w := h.watchTrees()
	o := h.direct(nodeOpts{env: deaf})
	n1 := h.startNode("n1", o)
	_, run := h.waitLeader(n1)
	run = h.waitWorkers(run)
	n2 := h.startNode("n2", o)
	h.waitFollower(n2, n1.ID)
	n3 := h.startNode("n3", o)
	h.waitFollower(n3, n1.ID)

	refusals := []struct {
		name, url, to string
		says          []string
	}{
		{name: "not queued", url: n1.HTTP, to: "nobody", says: []string{"409", "not_queued", `"nobody" is not queued`}},
		{name: "not the leader", url: n2.HTTP, to: "n3", says: []string{"409", "not_leader", "n1 leads"}},
		{name: "the leader itself", url: n1.HTTP, to: "n1", says: []string{"409", "self"}},
	}
	for _, tt := range refusals {
		out, code := switchover(t, tt.url, tt.to)
		for _, want := range tt.says {
			if code != 1 || !strings.Contains(out, want) {
				t.Fatalf("%s: electd switchover --to %s exited %d: %s; want 1 and %q", tt.name, tt.to, code, out, want)
			}
		}
		t.Logf("%s: refused: %s", tt.name, strings.TrimSpace(out))
	}
	if now := h.RunOf(run.Pid); now.Ended() || !proc.Alive(run.Pid) {
		t.Fatalf("a refused switchover stopped the child: %s", now)
	}
	if lead, _ := h.waitLeader(n1, n2, n3); lead != n1 {
		t.Fatalf("leader %s after the refusals, want n1", lead.ID)
	}
	// n3 queued (its /leader follows the election before it joins the
	// queue): a refusal as not queued changes nothing, so ask until it is.
	sent := time.Now()
	var out string
	h.Poll(leaderTimeout, "electd switchover --to n3 to succeed", func() (bool, string) {
		var code int
		out, code = switchover(t, n1.HTTP, "n3")
		return code == 0, out
	})
	// The switchover answers once the term is given up: the tree is gone.
	old := h.RunOf(run.Pid)
	if alive := h.liveWorkers([]record.Run{old}); alive != "" || proc.Alive(old.Pid) {
		t.Fatalf("switchover answered while the tree still runs: workers %s, main alive %v", alive, proc.Alive(old.Pid))
	}
	next := h.nextRun(old, leaderTimeout)
	if next.Node != n3.ID {
		t.Fatalf("the next child after the switchover to n3 is %s", next)
	}
	t.Logf("switchover: %s; n1's tree gone (its SIGTERM ignored, SIGKILL after %s) %s after the request, n3's child %s after that (token %d -> %d)",
		strings.TrimSpace(out), stopTimeout, kit.Millis(old.End().Sub(sent)), kit.Millis(next.Start.Sub(old.End())), old.Token, next.Token)
	if lead, _ := h.waitLeader(n1, n2, n3); lead != n3 {
		t.Fatalf("leader %s after the switchover, want n3", lead.ID)
	}

	// n2 was not skipped for good: it leads after n3.
	code, body, err := n3.Do("POST", "/resign", "")
	if err != nil || code != 200 {
		t.Fatalf("POST /resign to n3: %d %s %v", code, body, err)
	}
	if after := h.nextRun(next, leaderTimeout); after.Node != n2.ID {
		t.Fatalf("after n3 resigned, %s ran, want n2", after)
	}
	for _, r := range h.Runs() {
		if r.Node == n2.ID && r.Start.Before(next.Start) {
			t.Fatalf("n2 ran before n3: %s", r)
		}
	}
	h.finish(w, n1, n3, n2)
}

// finish stops every node with SIGTERM, followers first and the leader
// last, and checks the trees and the record log.
func (h *harness) finish(w *tree.Watch, nodes ...*node) {
	h.T.Helper()
	for _, n := range nodes {
		n.Signal(syscall.SIGTERM)
		if code := n.WaitExit(exitTimeout); code != 0 {
			h.T.Fatalf("%s exited with %d after SIGTERM, want 0", n.ID, code)
		}
	}
	h.finishTrees(w, record.Options{})
}

// switchover runs `electd switchover --to to --url http://addr` and
// returns its output and exit code.
func switchover(t *testing.T, addr, to string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.Electd, "switchover", "--to", to, "--url", "http://"+addr)
	cmd.Env = proc.BaseEnv()
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	if ee := (*exec.ExitError)(nil); err != nil && !errors.As(err, &ee) {
		t.Fatalf("electd switchover: %v", err)
	}
	return b.String(), cmd.ProcessState.ExitCode()
}
