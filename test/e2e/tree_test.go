package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/test/e2e/tree"
	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// The child is its whole process tree (DESIGN.md, "Containment"). In these
// tests the recorder's main process starts three workers (RECORD_WORKERS=1):
// one in its process group, one in a session of its own (setsid) and one
// double-forked daemon. Each writes a worker line every 5 ms under its
// term's token until it dies; nothing but electd ends them.

const (
	// stopMargin is supervisor.StopMargin: the time, beyond --stop-timeout,
	// that electd reserves before a term's deadline for the SIGKILL of the
	// tree, reaping and scheduling delays. (Not imported: the test drives
	// the built binary only.)
	stopMargin = 200 * time.Millisecond
	// driftPercent and epsilon are electd's default drift allowance: a deadline is
	// sendTime + ttl·(1 − drift) − epsilon.
	driftPercent = 1
	epsilon      = 10 * time.Millisecond
	// killSlack is how late a SIGKILL timer may fire on a loaded machine
	// (a CPU quota's throttling included): what the margin is there to
	// absorb.
	killSlack = 100 * time.Millisecond
)

var (
	// withWorkers: a child with a tree that lives until electd ends it.
	withWorkers = []string{"RECORD_WORKERS=1"}
	// mainKilled: the main process SIGKILLs itself after 1 s (as the OOM
	// killer does) and leaves its workers behind. Every worker must have
	// written by then: on a loaded CI machine one had not after 300 ms.
	mainKilled = []string{"RECORD_WORKERS=1", "RECORD_EXIT_AFTER=1s", "RECORD_EXIT_CODE=-9"}
	// deaf: the main process and its workers ignore SIGTERM.
	deaf = []string{"RECORD_WORKERS=1", "RECORD_IGNORE_TERM=1", "RECORD_WORKERS_IGNORE_TERM=1"}
)

// testTreeMainKilled: the child's main process is SIGKILLed and leaves its
// workers running. Whatever --on-exit does next (resign and hand over,
// restart in place, exit), no worker of the old tree writes at or after the
// next run's first line, and none is alive once the next run has started or
// once electd has exited. pgroup is run too (resign): electd must find and
// kill the workers that left the group while it lives.
func testTreeMainKilled(t *testing.T, s *kit.Store) {
	tests := []struct {
		name   string
		onExit string
		o      nodeOpts // more options for both nodes
		mode   string   // the mode n1 must report; "": not checked
		second bool     // a second node takes over
	}{
		{name: "resign", onExit: "resign", second: true},
		{name: "resign/pgroup", onExit: "resign", o: nodeOpts{args: []string{"--containment", "pgroup"}}, mode: "pgroup", second: true},
		{name: "resign/userns-as-nobody", onExit: "resign", o: nodeOpts{nobody: true}, mode: "userns", second: true},
		{name: "restart", onExit: "restart"},
		{name: "restart/userns-as-nobody", onExit: "restart", o: nodeOpts{nobody: true}, mode: "userns"},
		{name: "exit", onExit: "exit", second: true},
		{name: "exit/userns-as-nobody", onExit: "exit", o: nodeOpts{nobody: true}, mode: "userns", second: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, s)
			h.needHost(tt.o)
			w := h.watchTrees()
			o := nodeOpts{args: append([]string{"--on-exit", tt.onExit}, tt.o.args...), nobody: tt.o.nobody}
			n1 := h.startNode("n1", h.direct(o, nodeOpts{env: mainKilled}))
			if tt.mode != "" {
				h.checkMode(n1, tt.mode)
			}
			first := h.WaitRun(leaderTimeout, "n1's child", func(r record.Run) bool { return r.Node == n1.ID })
			var n2 *node
			if tt.second {
				n2 = h.startNode("n2", h.direct(o, nodeOpts{env: withWorkers}))
			}

			var final record.Run // the run that is still running at the end
			switch tt.onExit {
			case "resign":
				final = h.WaitRun(leaderTimeout, "n2's child", func(r record.Run) bool { return r.Node == n2.ID })
			case "restart":
				h.Poll(leaderTimeout, "a third start of the child", func() (bool, string) {
					runs := h.Runs()
					return len(runs) >= 3, "runs:\n" + kit.Describe(runs)
				})
				for _, r := range h.Runs() {
					if r.Node != n1.ID || r.Token != first.Token {
						t.Fatalf("a restart changed the node or the token: %s after %s", r, first)
					}
				}
			case "exit":
				if code := n1.WaitExit(leaderTimeout); code != 128+int(syscall.SIGKILL) {
					t.Fatalf("electd exited with %d, want 137 (its child's SIGKILL)", code)
				}
				// The moment electd has exited, its child's whole tree is gone.
				if alive := h.liveWorkers(h.runsOf(n1)); len(alive) > 0 {
					t.Errorf("electd --on-exit exit has exited, and workers of its child still run: %s", alive)
				}
				final = h.WaitRun(leaderTimeout, "n2's child", func(r record.Run) bool { return r.Node == n2.ID })
			}
			// The main process of each run that exited killed itself: the
			// time from its death to its last worker's last line (up to a
			// beat later than the worker's real death).
			lg := h.all()
			for _, r := range lg.Runs {
				if r.Exit.IsZero() || r.ExitCode != -9 {
					continue
				}
				ws := lg.WorkersOf(r)
				if len(ws) != tree.Roles || len(r.Spawned) != tree.Roles {
					t.Fatalf("run %s has %d spawned lines and %d workers writing, want %d of each", r, len(r.Spawned), len(ws), tree.Roles)
				}
				last := slices.MaxFunc(ws, func(a, b record.Worker) int { return a.Last.Compare(b.Last) })
				next := "none yet"
				for _, o := range lg.Runs {
					if o.Start.After(r.Start) {
						next = kit.Millis(o.Start.Sub(r.Exit)) + " (" + o.Node + ")"
						break
					}
				}
				t.Logf("%s: main process SIGKILLed; last worker line %s later (%s), next run started %s later",
					r, kit.Millis(last.Last.Sub(r.Exit)), last.Role, next)
			}
			// Shutdown is one more way out of a term: SIGTERM to the last
			// leader stops its child's tree before electd exits 0.
			last := n1
			if n2 != nil {
				last = n2
			}
			if final.Pid != 0 {
				if last.ID != final.Node {
					t.Fatalf("the last run %s is not %s's", final, last.ID)
				}
				h.waitWorkers(final)
			}
			for _, n := range h.Procs { // the follower first: it must not take over
				if n == last || n.Exited() {
					continue
				}
				n.Signal(syscall.SIGTERM)
				if code := n.WaitExit(exitTimeout); code != 0 {
					t.Fatalf("%s exited with %d after SIGTERM, want 0", n.ID, code)
				}
			}
			if !last.Exited() {
				last.Signal(syscall.SIGTERM)
				if code := last.WaitExit(exitTimeout); code != 0 {
					t.Fatalf("%s exited with %d after SIGTERM, want 0", last.ID, code)
				}
				if alive := h.liveWorkers(h.all().Runs); len(alive) > 0 {
					t.Errorf("%s exited after SIGTERM, and workers still run: %s", last.ID, alive)
				}
			}
			h.finishTrees(w, record.Options{AllowRestarts: tt.onExit == "restart"})
		})
	}
}

// testTreeKill9: kill -9 of electd while its child has workers of all three
// kinds. In pidns mode (auto picks it as root) and userns mode (auto picks
// it as nobody; asked for as root) the kernel kills the whole namespace:
// every process of the tree is gone within goneTimeout, and the time is
// logged. In pgroup mode (asked for, or auto's choice on a host that gives
// neither namespace) the documented limit holds: the direct child dies
// (Pdeathsig), its workers live on. Each subtest also checks that electd
// says which mode is in force.
func testTreeKill9(t *testing.T, s *kit.Store) {
	tests := []struct {
		name      string
		o         nodeOpts
		mode      string // reported
		contained bool   // the whole tree dies with electd
	}{
		{name: "auto", mode: "pidns", contained: true},
		{name: "pidns-from-env", o: nodeOpts{env: []string{"ELECTD_CONTAINMENT=pidns"}}, mode: "pidns", contained: true},
		{name: "auto-as-nobody", o: nodeOpts{nobody: true}, mode: "userns", contained: true},
		{name: "userns-as-root", o: nodeOpts{args: []string{"--containment", "userns"}}, mode: "userns", contained: true},
		{name: "pgroup", o: nodeOpts{args: []string{"--containment", "pgroup"}}, mode: "pgroup"},
		{name: "auto-without-namespaces", o: nodeOpts{host: noNamespaces}, mode: "pgroup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mode == "pidns" && os.Geteuid() != 0 {
				t.Skip("a PID namespace needs root here; CI runs as root")
			}
			h := newHarness(t, s)
			h.needHost(tt.o)
			o := h.direct(nodeOpts{env: withWorkers}, tt.o)
			n := h.startNode("n1", o)
			_, run := h.waitLeader(n)
			run = h.waitWorkers(run)
			h.checkMode(n, tt.mode)
			procs := tree.Of(n.Pid(), run)
			t.Logf("%s: electd %d, %d processes under it and its workers: %v", tt.mode, n.Pid(), len(procs), procs)
			// pgroup's survivors are killed by the harness's cleanup.

			killed := time.Now()
			n.Signal(syscall.SIGKILL)
			n.WaitExit(exitTimeout)
			if !tt.contained {
				// The limit: only the direct child dies with electd.
				if !proc.WaitGone(run.Pid, goneTimeout) {
					t.Fatalf("the direct child %d still alive %s after kill -9 of electd (pgroup)", run.Pid, goneTimeout)
				}
				childGone := time.Now()
				for _, sp := range run.Spawned {
					h.Poll(exitTimeout, fmt.Sprintf("the %s worker %d writing after the child's death", sp.Role, sp.Pid), func() (bool, string) {
						for _, wk := range h.all().Workers {
							if wk.Pid == sp.Pid && wk.Last.After(childGone) {
								return true, ""
							}
						}
						return false, "no line since " + stamp(childGone)
					})
				}
				t.Logf("pgroup: after kill -9 of electd the direct child was gone in %s; its %d workers live on, as documented (the test kills them)",
					kit.Millis(childGone.Sub(killed)), len(run.Spawned))
				return
			}
			gone, lastGone, alive := tree.GoneAll(procs, goneTimeout)
			if len(alive) > 0 {
				t.Fatalf("%s: %d processes of the tree still alive %s after kill -9 of electd: %v", tt.mode, len(alive), goneTimeout, alive)
			}
			var parts []string
			for _, pid := range procs {
				parts = append(parts, fmt.Sprintf("%d %s", pid, kit.Millis(gone[pid].Sub(killed))))
			}
			t.Logf("%s: kill -9 of electd -> every one of the %d processes of the tree gone in %s (%s)",
				tt.mode, len(procs), kit.Millis(lastGone.Sub(killed)), strings.Join(parts, ", "))
		})
	}
}

// testTreeIgnoresTerm: a child that ignores SIGTERM and whose workers do
// too. When the term ends (the store is cut off, or the leader resigns),
// the whole tree is SIGKILLed after --stop-timeout, within the margin, and
// by ValidUntil − margin for a cut-off leader: every worker's last line is
// before the successor's first, and no process of the tree is alive when
// the successor starts.
func testTreeIgnoresTerm(t *testing.T, s *kit.Store) {
	tests := []struct {
		name   string
		cut    bool // cut the store off, else POST /resign
		args   []string
		nobody bool // electd runs as nobody (auto: userns)
	}{
		{name: "cut-off/pidns", cut: true, args: []string{"--containment", "pidns"}},
		{name: "resign"},
		{name: "resign/userns-as-nobody", nobody: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if slices.Contains(tt.args, "pidns") && os.Geteuid() != 0 {
				t.Skip("a PID namespace needs root here; CI runs as root")
			}
			h := newHarness(t, s)
			h.needHost(nodeOpts{nobody: tt.nobody})
			w := h.watchTrees()
			o := h.direct(nodeOpts{args: tt.args, env: deaf, nobody: tt.nobody})
			var px *kit.Link
			if tt.cut {
				px = s.Link(t)
				o.dial, o.sys = px.Dial, px.SysProcAttr
			}
			n1 := h.startNode("n1", o)
			_, run := h.waitLeader(n1)
			run = h.waitWorkers(run)
			n2 := h.startNode("n2", h.direct(nodeOpts{args: tt.args, nobody: tt.nobody}))
			h.waitFollower(n2, n1.ID)
			if tt.nobody {
				h.checkMode(n1, "userns")
			}

			ended := time.Now()
			if tt.cut {
				px.Cut()
			} else {
				code, body, err := n1.Do(http.MethodPost, "/resign", "")
				if err != nil || code != http.StatusOK {
					t.Fatalf("POST /resign: %d %s %v", code, body, err)
				}
				// /resign answers once the term is given up: the tree is gone.
				if alive := h.liveWorkers([]record.Run{h.RunOf(run.Pid)}); len(alive) > 0 || proc.Alive(run.Pid) {
					t.Errorf("/resign answered 200 while the tree still runs: workers %s, main alive %v", alive, proc.Alive(run.Pid))
				}
			}
			next := h.nextRun(run, leaderTimeout)
			lg := h.all()
			var old record.Run
			for _, r := range lg.Runs {
				if r.Pid == run.Pid {
					old = r
				}
			}
			if len(old.Terms) == 0 || old.Ended() {
				t.Fatalf("want a child that logged the ignored SIGTERM and no stop/exit: %s", old)
			}
			term := old.Terms[0]
			ws := lg.WorkersOf(old)
			if len(ws) != tree.Roles {
				t.Fatalf("%d workers of %s wrote, want %d", len(ws), old, tree.Roles)
			}
			budget := stopTimeout + stopMargin
			// ValidUntil as electd logged it when its deadline made it stop;
			// else (the term ended another way) the latest it can have been:
			// the last renewal was sent before the cut.
			validUntil, logged := validUntilAtStop(n1)
			if !logged {
				validUntil = ended.Add(ttl*(100-driftPercent)/100 - epsilon)
			}
			deadline := validUntil.Add(-stopMargin + killSlack)
			var (
				parts  []string
				latest time.Duration // the tree's last line after the SIGTERM
			)
			for _, wk := range append(ws, record.Worker{Role: "main", Pid: old.Pid, Last: old.End()}) {
				after := wk.Last.Sub(term)
				parts = append(parts, fmt.Sprintf("%s %s", wk.Role, kit.Millis(after)))
				if after >= budget {
					t.Errorf("the %s process (pid %d) wrote %s after the SIGTERM, past --stop-timeout %s + margin %s",
						wk.Role, wk.Pid, kit.Millis(after), stopTimeout, stopMargin)
				}
				latest = max(latest, after)
				if tt.cut && !wk.Last.Before(deadline) {
					t.Errorf("the %s process (pid %d) wrote %s after the cut, past ValidUntil − margin + %s (%s after the cut; ValidUntil logged: %v)",
						wk.Role, wk.Pid, kit.Millis(wk.Last.Sub(ended)), killSlack, kit.Millis(deadline.Sub(ended)), logged)
				}
				if !wk.Last.Before(next.Start) {
					t.Errorf("the %s process (pid %d) wrote %s after the next child started", wk.Role, wk.Pid, kit.Millis(wk.Last.Sub(next.Start)))
				}
			}
			// The tree as a whole got the whole --stop-timeout, or, cut
			// off, what was left of it before ValidUntil − margin: a
			// SIGTERM that a loaded machine sends late does not move the
			// deadline's SIGKILL. (Not each process: on a loaded machine
			// one may be starved of the CPU for longer than a beat.)
			grace := stopTimeout
			if tt.cut {
				grace = min(grace, validUntil.Add(-stopMargin).Sub(term))
			}
			if latest < grace-beatSlack {
				t.Errorf("the tree's last line was %s after the SIGTERM: SIGKILLed before its grace of %s (--stop-timeout %s)", kit.Millis(latest), kit.Millis(grace), stopTimeout)
			}
			how := "POST /resign"
			if tt.cut {
				how = "the cut"
			}
			t.Logf("ignores SIGTERM: SIGTERM %s after %s; last lines after it: %s; next child %s after the SIGTERM",
				kit.Millis(term.Sub(ended)), how, strings.Join(parts, ", "), kit.Millis(next.Start.Sub(term)))
			if tt.cut {
				t.Logf("cut off: ValidUntil %s after the cut (from electd's log: %v); the tree's last line %s before it",
					kit.Millis(validUntil.Sub(ended)), logged, kit.Millis(validUntil.Sub(term.Add(latest))))
			}
			if px != nil {
				px.Heal()
			}
			for _, n := range []*node{n1, n2} { // the follower first
				n.Signal(syscall.SIGTERM)
				if code := n.WaitExit(exitTimeout); code != 0 {
					t.Fatalf("%s exited with %d after SIGTERM, want 0", n.ID, code)
				}
			}
			h.finishTrees(w, record.Options{})
		})
	}
}

// testContainmentRefused: a mode that is not available, or not a mode,
// exits 2 before campaigning, with a message naming --containment.
func testContainmentRefused(t *testing.T, s *kit.Store) {
	tests := []struct {
		name string
		o    nodeOpts
		says []string
	}{
		{name: "cgroup", o: nodeOpts{args: []string{"--containment", "cgroup"}}, says: []string{"--containment", "cgroup"}},
		{name: "cgroup-from-env", o: nodeOpts{env: []string{"ELECTD_CONTAINMENT=cgroup"}}, says: []string{"containment", "cgroup"}},
		// Like every configuration error: "invalid containment: ...", with
		// the modes there are.
		{name: "unknown", o: nodeOpts{args: []string{"--containment", "jail"}}, says: []string{"containment", "jail", "pidns", "userns", "pgroup"}},
		// What is not available on this host, and what would work.
		{name: "pidns-as-nobody", o: nodeOpts{nobody: true, args: []string{"--containment", "pidns"}},
			says: []string{"pidns is not available", "CAP_SYS_ADMIN", "--containment userns", "pgroup"}},
		{name: "userns-without-userns", o: nodeOpts{host: noUserns, args: []string{"--containment", "userns"}},
			says: []string{"userns is not available", "user.max_user_namespaces=0", "--containment pidns", "pgroup"}},
		{name: "pidns-without-namespaces", o: nodeOpts{host: noNamespaces, args: []string{"--containment", "pidns"}},
			says: []string{"pidns is not available", "CAP_SYS_ADMIN", "--containment pgroup", "userns is not available either"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, s)
			h.needHost(tt.o)
			_, err := h.tryStart("n1", h.direct(tt.o))
			if err == nil {
				t.Fatal("electd started and answered /livez")
			}
			n := h.Procs[len(h.Procs)-1]
			if code := n.WaitExit(exitTimeout); code != 2 {
				t.Fatalf("electd exited with %d, want 2:\n%s", code, n.Tail())
			}
			out, _ := os.ReadFile(n.LogPath)
			var said string
			for _, l := range strings.Split(string(out), "\n") {
				if l != "" && !slices.ContainsFunc(tt.says, func(s string) bool { return !strings.Contains(l, s) }) {
					said = l
				}
			}
			if said == "" {
				t.Fatalf("no line of electd's output names %q:\n%s", tt.says, out)
			}
			t.Logf("exit 2: %s", said)
			if runs := h.Runs(); len(runs) != 0 {
				t.Fatalf("a child ran:\n%s", kit.Describe(runs))
			}
		})
	}
}

// validUntilAtStop is the term's ValidUntil that n logged when its
// deadline, near without a renewal, made it stop the child.
func validUntilAtStop(n *node) (time.Time, bool) {
	b, _ := os.ReadFile(n.LogPath)
	for _, l := range bytes.Split(b, []byte("\n")) {
		var e map[string]any
		if json.Unmarshal(l, &e) != nil {
			continue
		}
		if msg, _ := e["msg"].(string); !strings.HasPrefix(msg, "lease deadline near") {
			continue
		}
		if v, ok := findKey(e, "valid_until").(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// findKey finds key in a decoded JSON object, in its groups too.
func findKey(m map[string]any, key string) any {
	if v, ok := m[key]; ok {
		return v
	}
	for _, v := range m {
		if g, ok := v.(map[string]any); ok {
			if v := findKey(g, key); v != nil {
				return v
			}
		}
	}
	return nil
}

// needHost skips, loudly (fails with $CI set), a subtest whose node
// options this machine cannot give: electd as nobody or on a host of
// another kind needs root, setpriv and unshare, and as nobody, unprivileged
// user namespaces (the mode the subtests expect there).
func (h *harness) needHost(o nodeOpts) {
	h.T.Helper()
	if !o.nobody && o.host == "" {
		return
	}
	skip := func(format string, args ...any) {
		h.T.Helper()
		if os.Getenv("CI") != "" {
			h.T.Fatalf(format, args...)
		}
		h.T.Skipf("SKIP: "+format, args...)
	}
	if os.Geteuid() != 0 {
		skip("running electd as another user or on a host of another kind needs root (euid %d)", os.Geteuid())
	}
	for _, tool := range []string{"setpriv", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip("%s (util-linux) is needed: %v", tool, err)
		}
	}
	if o.nobody {
		cmd := exec.Command("unshare", "--user", "--pid", "--fork", "true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		if out, err := cmd.CombinedOutput(); err != nil {
			skip("this host refuses unprivileged user namespaces (userns), which nobody's subtests expect: %v %s", err, out)
		}
	}
}

// checkMode checks that n says which containment mode is in force: its
// start log line (msg "containment", mode), /healthz and the
// electd_containment_info metric.
func (h *harness) checkMode(n *node, want string) {
	h.T.Helper()
	var modes []string
	b, _ := os.ReadFile(n.LogPath)
	for _, l := range bytes.Split(b, []byte("\n")) {
		var e struct{ Msg, Mode string }
		if json.Unmarshal(l, &e) == nil && e.Msg == "containment" {
			modes = append(modes, e.Mode)
		}
	}
	if len(modes) != 1 || modes[0] != want {
		h.T.Errorf("%s's log has containment lines with modes %q, want one with %q", n.ID, modes, want)
	}
	code, body, err := n.Get("/healthz")
	var hz struct {
		Containment string `json:"containment"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &hz) != nil || hz.Containment != want {
		h.T.Errorf("%s: /healthz %d %v: %s; want \"containment\":%q", n.ID, code, err, body, want)
	}
	code, body, err = n.Get("/metrics")
	metric := fmt.Sprintf(`electd_containment_info{election=%q,mode=%q} 1`, h.Name, want)
	if err != nil || code != http.StatusOK || !bytes.Contains(body, []byte(metric)) {
		var got []string
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "electd_containment_info") {
				got = append(got, l)
			}
		}
		h.T.Errorf("%s: /metrics %d %v has %q, want %s", n.ID, code, err, got, metric)
	}
}

// all reads the whole record log, runs and workers.
func (h *harness) all() record.Log {
	h.T.Helper()
	return tree.ReadLog(h.T, h.LogPath)
}

// waitWorkers waits until run has spawned all its workers and each of them
// runs and has written, and returns the run with its spawned lines.
func (h *harness) waitWorkers(run record.Run) record.Run {
	h.T.Helper()
	h.Poll(leaderTimeout, "the workers of "+run.String(), func() (bool, string) {
		lg := h.all()
		for _, r := range lg.Runs {
			if r.Pid != run.Pid || !r.Start.Equal(run.Start) {
				continue
			}
			run = r
			if len(r.Spawned) < tree.Roles {
				return false, fmt.Sprintf("%d spawned lines", len(r.Spawned))
			}
			if ws := lg.WorkersOf(r); len(ws) < tree.Roles {
				return false, fmt.Sprintf("%d workers writing", len(ws))
			}
			for _, sp := range r.Spawned {
				if !tree.WorkerAlive(sp.Pid, h.LogPath) {
					return false, fmt.Sprintf("the %s worker %d is not running", sp.Role, sp.Pid)
				}
			}
			return true, ""
		}
		return false, "no such run"
	})
	return run
}

// runsOf are n's children's runs.
func (h *harness) runsOf(n *node) []record.Run {
	h.T.Helper()
	var out []record.Run
	for _, r := range h.Runs() {
		if r.Node == n.ID {
			out = append(out, r)
		}
	}
	return out
}

// liveWorkers describes the workers of runs still alive ("" when none).
func (h *harness) liveWorkers(runs []record.Run) string { return tree.Live(runs, h.LogPath) }

// watchTrees starts a tree.Watch on the harness's log; finishTrees halts
// it (and so does cleanup).
func (h *harness) watchTrees() *tree.Watch {
	w := tree.NewWatch(h.LogPath)
	h.T.Cleanup(func() { w.Halt() })
	return w
}

// finishTrees halts w and fails the test on what it saw; then it checks
// the whole log (no worker wrote at or after a later run's first line) and
// that no worker is alive: call it once every electd has exited or has no
// child.
func (h *harness) finishTrees(w *tree.Watch, opt record.Options) {
	h.T.Helper()
	bad, starts, lag := w.Halt()
	for _, v := range bad {
		h.T.Errorf("%s", v)
	}
	h.T.Logf("tree watch: %d run starts checked in /proc, at most %s after their first line", starts, kit.Millis(lag))
	lg := h.all()
	if err := lg.Check(opt); err != nil {
		h.T.Errorf("record log:\n%v\nruns:\n%s", err, kit.Describe(lg.Runs))
	}
	if alive := h.liveWorkers(lg.Runs); alive != "" {
		h.T.Errorf("workers still alive at the end: %s", alive)
	}
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }
