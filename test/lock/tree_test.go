package lock

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/electd/electd/test/e2e/tree"
	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/record"
)

// The locked command is its whole process tree (DESIGN.md, "Containment"):
// here the recorder's main process starts three workers (RECORD_WORKERS=1),
// one in its process group, one in a session of its own (setsid), one
// double-forked daemon, each writing a worker line every 5 ms under the
// lock's token until it dies. Nothing but electd ends them.

var (
	// mainKilled: the main process SIGKILLs itself after 3 s (as the OOM
	// killer does) and leaves its workers behind. The next holder must have
	// queued by then: on a loaded CI machine a second electd took 0.7 s
	// to join a Redis Cluster election after the first one's command
	// started, past the 300 ms this used to be, and 1.5 s on Sentinel and
	// on the Kubernetes API (CI run K), past the 1 s it was next.
	mainKilled = []string{"RECORD_WORKERS=1", "RECORD_EXIT_AFTER=3s", "RECORD_EXIT_CODE=-9"}
	// mainDone: the main process succeeds after 300 ms and leaves its
	// workers behind (`sh -c 'worker & main'`).
	mainDone = []string{"RECORD_WORKERS=1", "RECORD_EXIT_AFTER=300ms", "RECORD_EXIT_CODE=0"}
)

// testTreeMainKilled: the command's main process dies and leaves workers
// running. `electd lock` exits only once the whole tree is gone; the next
// holder's command starts only then (no worker line at or after its first
// line, no worker alive when it appears); with --once-per, the run is
// recorded only after every worker is gone, and a run whose main process
// was killed records nothing.
func testTreeMainKilled(t *testing.T, s *kit.Store) {
	tests := []struct {
		name string
		args []string
		once bool
	}{
		{name: "plain"},
		{name: "plain/pgroup", args: []string{"--containment", "pgroup"}},
		{name: "once-per", once: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, s)
			w := tree.NewWatch(h.LogPath)
			t.Cleanup(func() { w.Halt() })
			args := tt.args
			if tt.once {
				args = append(args, "--once-per", "1m")
			}
			a := h.lock("a", opts{args: args, env: mainKilled})
			aRun := h.waitRunOf(a)
			bEnv := mainKilled
			if tt.once {
				bEnv = mainDone // a success, to be recorded
			}
			b := h.lock("b", opts{args: args, env: bEnv})
			h.waitQueued(2)

			a.mustExit(137)
			h.exitedWithoutTree(a, aRun)
			bRun := h.waitRunOf(b)
			if tt.once {
				if rec := s.LastRun(t, h.Name); rec != nil && rec.ID == "a" {
					t.Fatalf("a's run, whose main process was SIGKILLed, was recorded: %+v", rec)
				}
				h.recordedWithoutTree(bRun)
				b.mustExit(0)
			} else {
				b.mustExit(137)
			}
			h.exitedWithoutTree(b, bRun)

			if tt.once {
				// Another host, after b exited, sees the run recorded.
				c := h.lock("c", opts{args: args, env: mainDone})
				c.mustExit(0)
				c.said("already run by b")
			}
			bad, starts, lag := w.Halt()
			for _, v := range bad {
				t.Error(v)
			}
			t.Logf("tree watch: %d command starts checked in /proc, at most %s after their first line", starts, kit.Millis(lag))
			lg := h.all()
			if err := lg.Check(record.Options{}); err != nil {
				t.Fatalf("record log:\n%v\nruns:\n%s", err, kit.Describe(lg.Runs))
			}
			if len(lg.Runs) != 2 {
				t.Fatalf("%d runs, want a's and b's:\n%s", len(lg.Runs), kit.Describe(lg.Runs))
			}
			for _, r := range lg.Runs {
				ws := lg.WorkersOf(r)
				if len(ws) != tree.Roles {
					t.Fatalf("%d workers of %s wrote, want %d", len(ws), r, tree.Roles)
				}
				last := slices.MaxFunc(ws, func(a, b record.Worker) int { return a.Last.Compare(b.Last) })
				t.Logf("%s: main process ended; its last worker's last line %s later (%s)", r, kit.Millis(last.Last.Sub(r.End())), last.Role)
			}
			h.waitQueued(0)
		})
	}
}

// testContainmentRefused: `electd lock --containment cgroup` (not built)
// exits 2, naming the flag, and runs nothing.
func testContainmentRefused(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	p := h.lock("x", opts{args: []string{"--containment", "cgroup"}})
	p.mustExit(2)
	p.said("--containment", "cgroup")
	if runs := h.Runs(); len(runs) != 0 {
		t.Fatalf("the command ran:\n%s", kit.Describe(runs))
	}
}

// waitRunOf waits for the run of p's command, failing at once if p exits
// before it starts.
func (h *harness) waitRunOf(p *proc) record.Run {
	h.T.Helper()
	var found record.Run
	h.Poll(runTimeout, p.ID+"'s command running", func() (bool, string) {
		for _, r := range h.Runs() {
			if r.Node == p.ID {
				found = r
				return true, ""
			}
		}
		if p.Exited() {
			h.T.Fatalf("%s exited with %d before its command started:\n%s", p.ID, p.ExitCode(), p.Tail())
		}
		return false, "no run yet"
	})
	return found
}

// exitedWithoutTree fails the test if any worker of run is alive now that
// p, which ran it, has exited.
func (h *harness) exitedWithoutTree(p *proc, run record.Run) {
	h.T.Helper()
	run = h.waitWorkersLogged(run)
	if alive := tree.Live([]record.Run{run}, h.LogPath); alive != "" {
		h.T.Errorf("%s has exited, and workers of its command still run: %s", p.ID, alive)
	}
}

// recordedWithoutTree waits for the --once-per run record, polling the
// store directly every millisecond; the moment it appears, no worker of run
// may be alive, and its time must be after every worker's last line.
func (h *harness) recordedWithoutTree(run record.Run) {
	h.T.Helper()
	run = h.waitWorkersLogged(run)
	deadline := time.Now().Add(runTimeout)
	rec := h.s.LastRun(h.T, h.Name)
	for ; rec == nil; rec = h.s.LastRun(h.T, h.Name) {
		if time.Now().After(deadline) {
			h.T.Fatalf("no run record after %s", runTimeout)
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
	seen := time.Now()
	if alive := tree.Live([]record.Run{run}, h.LogPath); alive != "" {
		h.T.Errorf("the run was recorded while workers of its command still run: %s", alive)
	}
	if rec.ID != run.Node || rec.Token != run.Token {
		h.T.Errorf("run record %+v, want %s's with token %d", rec, run.Node, run.Token)
	}
	lg := h.all()
	for _, w := range lg.WorkersOf(run) {
		if !w.Last.Before(rec.Finished) {
			h.T.Errorf("the run was recorded as finished at %s, %s before the %s worker's last line",
				rec.Finished.Format(time.StampMicro), kit.Millis(w.Last.Sub(rec.Finished)), w.Role)
		}
	}
	h.T.Logf("run recorded: finished %s after the main process's exit line, seen in the store %s after that",
		kit.Millis(rec.Finished.Sub(h.RunOf(run.Pid).End())), kit.Millis(seen.Sub(rec.Finished)))
}

// waitWorkersLogged waits until run's log holds its spawned lines (the
// recorder writes them before it can exit), and returns the run.
func (h *harness) waitWorkersLogged(run record.Run) record.Run {
	h.T.Helper()
	h.Poll(runTimeout, "the spawned lines of "+run.String(), func() (bool, string) {
		run = h.RunOf(run.Pid)
		return len(run.Spawned) == tree.Roles, strconv.Itoa(len(run.Spawned)) + " spawned lines"
	})
	return run
}

// all reads the whole record log, runs and workers.
func (h *harness) all() record.Log {
	h.T.Helper()
	return tree.ReadLog(h.T, h.LogPath)
}
