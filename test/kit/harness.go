package kit

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/test/record"
)

// PollEvery is how often Poll and Hold look at their condition.
const PollEvery = 10 * time.Millisecond

// Poll calls cond every PollEvery until it reports done, and fails the test
// with cond's last status after within.
func Poll(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, status := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, within, status)
		}
		time.Sleep(PollEvery) // polling a condition with a deadline
	}
}

// Hold fails the test unless cond holds at every poll for d: a stability
// check, not a synchronisation.
func Hold(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if ok, status := cond(); !ok {
			t.Fatalf("%s: stopped holding after %s: %s", what, d-time.Until(end), status)
		}
		time.Sleep(PollEvery)
	}
}

// Runs reads the record log at path, failing the test if it does not parse.
func Runs(t testing.TB, path string) []record.Run {
	t.Helper()
	runs, err := record.ReadFile(path)
	if err != nil {
		t.Fatalf("record log: %v", err)
	}
	return runs
}

// Check proves the record log at path safe so far, and returns its runs.
func Check(t testing.TB, path string, opt record.Options) []record.Run {
	t.Helper()
	runs := Runs(t, path)
	if err := record.Check(runs, opt); err != nil {
		t.Fatalf("record log:\n%v\nruns:\n%s", err, Describe(runs))
	}
	return runs
}

// RunOf returns the current state of the run with pid in the record log at
// path, failing the test if there is none.
func RunOf(t testing.TB, path string, pid int) record.Run {
	t.Helper()
	for _, r := range Runs(t, path) {
		if r.Pid == pid {
			return r
		}
	}
	t.Fatalf("no run with pid %d", pid)
	return record.Run{}
}

// CheckCutOff checks the handover from a holder cut off from the store at
// cut to the next one: the cut-off run old was stopped with SIGTERM and
// ended before cut+ttl (its lease was guaranteed at most ttl·(1−drift)
// after the last renewal sent before the cut, so it must be gone by then),
// and next started after old ended. It logs the times.
func CheckCutOff(t testing.TB, cut time.Time, ttl time.Duration, old, next record.Run) {
	t.Helper()
	if old.Stop.IsZero() {
		t.Errorf("the cut-off child %s was not stopped with SIGTERM", old)
	}
	if end := old.End(); !end.Before(cut.Add(ttl)) {
		t.Errorf("the cut-off child ran until %s after the cut, past any lease deadline", end.Sub(cut))
	}
	margin := next.Start.Sub(old.End())
	if margin <= 0 {
		t.Fatalf("the next child %s started %s before the cut-off one %s ended", next, -margin, old)
	}
	t.Logf("cut-off: the old child stopped %s after the cut, the next started %s after the cut; margin %s",
		Millis(old.End().Sub(cut)), Millis(next.Start.Sub(cut)), Millis(margin))
}

// Millis renders a duration in milliseconds for logs.
func Millis(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// ChildExits are the ways the recorder exits on its own, each with the exit
// code electd passes on: the child's own, or 128+N for a child killed by
// signal N.
var ChildExits = []struct {
	Name string
	Code string // RECORD_EXIT_CODE; -9: it kills itself with SIGKILL
	Want int    // electd's exit code
}{
	{"code-0", "0", 0},
	{"code-3", "3", 3},
	{"code-7", "7", 7},
	{"SIGKILL", "-9", 137},
}

// Describe lists runs, one an indented line, for failure messages.
func Describe(runs []record.Run) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	return b.String()
}

// Tail is the last n lines of the log at path of process id, under a
// header, for failure messages.
func Tail(id, path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last lines of %s (%s):\n%s", id, path, strings.Join(lines, "\n"))
}
