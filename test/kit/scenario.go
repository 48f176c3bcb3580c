package kit

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/test/e2e/tree"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// Scenario is what a scenario of test/e2e or test/lock is made of: a name
// of its own for its election or lock, a temporary directory, the record
// log that all its children append to, and the electd processes it
// started. A suite's harness embeds it and adds its own way of starting
// electd.
type Scenario struct {
	T       *testing.T
	Name    string // prefix plus the test's name
	Dir     string
	LogPath string    // the record log
	Procs   []*Electd // every electd started with a Spec made by s.Spec, in start order
	// Verify, if set, judges the whole record log at cleanup.
	Verify func(record.Log) error

	recorder string        // the children's program
	gone     time.Duration // how long a killed electd's child may take to go
	after    func()        // the store's check of the election, last (Preparer)
}

// NewScenario prepares a scenario of t on st whose name starts with
// prefix, and whose children run recorder; a store that prepares its
// elections (Preparer) prepares the scenario's. At cleanup it kills every electd, reports
// the crashes in their logs, fails the test for each child still alive
// gone after its electd was killed, and kills it, kills grandchildren and
// workers left over (whether those may outlive electd is for the test to
// say), runs Verify and the store's check of the election, and on
// failure prints the logs and the runs.
func NewScenario(t *testing.T, st *Store, prefix, recorder string, gone time.Duration) *Scenario {
	dir := t.TempDir()
	s := &Scenario{
		T: t, Dir: dir,
		Name:     prefix + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()),
		LogPath:  filepath.Join(dir, "record.log"),
		recorder: recorder, gone: gone,
	}
	t.Cleanup(s.cleanup)
	if p, ok := st.Servers.(Preparer); ok {
		s.after = p.Prepare(t, s.Name)
	}
	return s
}

func (s *Scenario) cleanup() {
	t := s.T
	for _, e := range s.Procs {
		e.Kill()
		e.Crashes()
	}
	lg, err := record.ReadAll(s.LogPath)
	if err != nil {
		t.Errorf("record log: %v", err)
	}
	for _, r := range lg.Runs {
		KillOutlived(t, s.recorder, s.gone, r)
		for _, gc := range r.Grandchildren {
			if proc.Alive(gc) && proc.IsOurs(gc, "sleep") {
				t.Logf("grandchild %d of %s is still alive after its electd was SIGKILLed; killing it", gc, r)
				_ = syscall.Kill(gc, syscall.SIGKILL)
			}
		}
	}
	// Workers (RECORD_WORKERS) that outlived electd, as they do outside a
	// PID namespace.
	for _, pid := range tree.Kill(lg.Runs, s.LogPath, s.gone) {
		t.Logf("worker %d was still alive at the end of the test; killed it", pid)
	}
	if err == nil && s.Verify != nil {
		if err := s.Verify(lg); err != nil {
			t.Errorf("record log %s:\n%v", s.LogPath, err)
		}
	}
	if s.after != nil {
		s.after()
	}
	if t.Failed() {
		for _, e := range s.Procs {
			t.Log(e.Tail())
		}
		t.Logf("runs in %s:\n%s", s.LogPath, Describe(lg.Runs))
	}
}

// Spec is how to start electd with args as process id of the scenario:
// with a log file of its own, the record log in $RECORD_LOG and env, and
// kept in Procs.
func (s *Scenario) Spec(id string, args, env []string) Spec {
	return Spec{
		ID:      id,
		Args:    args,
		Env:     append([]string{"RECORD_LOG=" + s.LogPath}, env...),
		LogPath: filepath.Join(s.Dir, fmt.Sprintf("%s-%d.log", id, len(s.Procs))),
		Started: func(e *Electd) { s.Procs = append(s.Procs, e) },
	}
}

// Runs reads the record log, failing the test if it does not parse.
func (s *Scenario) Runs() []record.Run { s.T.Helper(); return Runs(s.T, s.LogPath) }

// Check proves the record log safe so far and returns its runs.
func (s *Scenario) Check(opt record.Options) []record.Run {
	s.T.Helper()
	return Check(s.T, s.LogPath, opt)
}

// RunOf returns the current state of the run with pid.
func (s *Scenario) RunOf(pid int) record.Run { s.T.Helper(); return RunOf(s.T, s.LogPath, pid) }

// Poll is Poll on the scenario's test.
func (s *Scenario) Poll(within time.Duration, what string, cond func() (bool, string)) {
	s.T.Helper()
	Poll(s.T, within, what, cond)
}

// Hold is Hold on the scenario's test.
func (s *Scenario) Hold(d time.Duration, what string, cond func() (bool, string)) {
	s.T.Helper()
	Hold(s.T, d, what, cond)
}

// WaitRun waits for a run in the record log matching match and returns it.
func (s *Scenario) WaitRun(within time.Duration, what string, match func(record.Run) bool) record.Run {
	s.T.Helper()
	var found record.Run
	s.Poll(within, what, func() (bool, string) {
		runs := s.Runs()
		for _, r := range runs {
			if match(r) {
				found = r
				return true, ""
			}
		}
		return false, "runs:\n" + Describe(runs)
	})
	return found
}

// KillOutlived fails the test if r's child (a recorder, prog) is still
// alive within after its electd was SIGKILLed, and SIGKILLs it.
func KillOutlived(t testing.TB, prog string, within time.Duration, r record.Run) {
	t.Helper()
	if !proc.WaitGone(r.Pid, within) && proc.IsOurs(r.Pid, prog) {
		t.Errorf("child %s outlived its electd (SIGKILLed) by %s; killing it", r, within)
		_ = syscall.Kill(r.Pid, syscall.SIGKILL)
	}
}
