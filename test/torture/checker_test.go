package torture

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/test/record"
)

// These tests run the checker on hand-written logs: no servers, no
// processes (pids are far beyond pid_max, so never alive).

var t0 = time.Unix(1_700_000_000, 0)

func at(msec int) time.Time { return t0.Add(time.Duration(msec) * time.Millisecond) }

// lines renders record lines: each entry is kind, node, token, pid, ms,
// and the extra fields (a worker's role, a spawned line's pid and role).
type ln struct {
	kind, node, token string
	pid, ms           int
	extra             string
}

func appendLines(t *testing.T, path string, ls ...ln) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range ls {
		if _, err := f.WriteString(record.Format(l.kind, l.node, l.token, l.pid, at(l.ms), l.extra)); err != nil {
			t.Fatal(err)
		}
	}
}

func testCluster(t *testing.T) *cluster {
	path := filepath.Join(t.TempDir(), "record.log")
	return &cluster{t: t, cfg: config{stopTimeout: 500 * time.Millisecond}, logPath: path, j: newJournal(path)}
}

func (c *cluster) mustSync() {
	c.t.Helper()
	if err := c.j.sync(); err != nil {
		c.t.Fatal(err)
	}
}

const pidA, pidB = 1 << 30, 1<<30 + 1 // beyond any pid_max

func wantErrs(t *testing.T, errs []error, want ...string) {
	t.Helper()
	got := joinErrs(errs)
	if len(want) == 0 && len(errs) > 0 {
		t.Fatalf("unexpected violations:\n%s", got)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("violations %q do not mention %q", got, w)
		}
	}
}

func TestCheckerHandover(t *testing.T) {
	c := testCluster(t)
	appendLines(t, c.logPath,
		ln{"start", "a", "5", pidA, 0, ""}, ln{"beat", "a", "5", pidA, 5, ""}, ln{"stop", "a", "5", pidA, 9, ""},
		ln{"start", "b", "7", pidB, 20, ""}, ln{"beat", "b", "7", pidB, 25, ""})
	// A line still being written is not read yet.
	if err := os.WriteFile(c.logPath+".partial", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(c.logPath, os.O_WRONLY|os.O_APPEND, 0)
	_, _ = f.WriteString("beat b 7 ")
	_ = f.Close()
	c.mustSync()
	wantErrs(t, c.verify())
	if n := c.j.next(c.j.runs[0]); n == nil || n.Node != "b" {
		t.Errorf("next after a = %v, want b's run", n)
	}
	if c.j.fence.accepted != 5 || c.j.fence.rejected != 0 || c.j.lines != 5 {
		t.Errorf("fence %+v after %d lines", c.j.fence, c.j.lines)
	}
}

func TestCheckerOverlapAndTokens(t *testing.T) {
	c := testCluster(t)
	appendLines(t, c.logPath,
		ln{"start", "a", "5", pidA, 0, ""}, ln{"beat", "a", "5", pidA, 5, ""},
		ln{"start", "b", "4", pidB, 8, ""}, // a lower token, while a still runs
		ln{"beat", "a", "5", pidA, 10, ""}, ln{"beat", "b", "4", pidB, 12, ""})
	c.mustSync()
	wantErrs(t, c.verify(), "overlap", "token order", "rejected 2 writes of children that were never paused")
}

// A paused child that resumes after the next term began: its stale window
// is exempt from the overlap check, and the fence rejects its writes.
func TestCheckerPausedChild(t *testing.T) {
	c := testCluster(t)
	appendLines(t, c.logPath, ln{"start", "a", "5", pidA, 0, ""}, ln{"beat", "a", "5", pidA, 5, ""})
	c.mustSync()
	// Paused at 6 ms; the next term starts at 2000 ms; resumed at 4000 ms.
	p := c.j.paused(c.j.run(pidA), at(6), at(4000))
	appendLines(t, c.logPath,
		ln{"start", "b", "7", pidB, 2000, ""}, ln{"beat", "b", "7", pidB, 2005, ""},
		ln{"beat", "a", "5", pidA, 3, ""}, // stamped before the pause, written after the resume
		ln{"beat", "a", "5", pidA, 4001, ""}, ln{"stop", "a", "5", pidA, 4002, ""},
		ln{"beat", "b", "7", pidB, 4005, ""})
	c.mustSync()
	wantErrs(t, c.verify())
	if p.staleLines != 2 || p.afterNewer != 3 || p.rejected != 3 || p.window() != 2*time.Millisecond {
		t.Errorf("pause %+v, window %s", *p, p.window())
	}
	if got := c.j.adjusted().Runs[0].End(); !got.Equal(at(5)) {
		t.Errorf("the paused run ends at %s for the overlap check, want its last line before the resume", got)
	}
}

// A paused child whose pre-pause life overlaps the next term is still an
// overlap; one that runs on long after its resume is a violation too.
func TestCheckerPausedChildViolations(t *testing.T) {
	c := testCluster(t)
	appendLines(t, c.logPath, ln{"start", "a", "5", pidA, 0, ""}, ln{"beat", "a", "5", pidA, 100, ""})
	c.mustSync()
	c.j.paused(c.j.run(pidA), at(101), at(4000))
	appendLines(t, c.logPath,
		ln{"start", "b", "7", pidB, 50, ""}, // began before a was even paused
		ln{"beat", "a", "5", pidA, 4001, ""}, ln{"beat", "a", "5", pidA, 9000, ""})
	c.mustSync()
	wantErrs(t, c.verify(), "overlap", "ran 5s after it was resumed")
}

func TestQuantile(t *testing.T) {
	s := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if q := quantile(s, 0.5); q != 5 {
		t.Errorf("median %d", q)
	}
	if q := quantile(s, 0.99); q != 10 {
		t.Errorf("p99 %d", q)
	}
	if q := quantile(s[:1], 0.99); q != 1 {
		t.Errorf("p99 of one %d", q)
	}
}

// A child's workers belong to its term: gone before the next term began
// they pass; one that writes at the next term's first line is an overlap,
// and its write, after a newer term's, is one the fence rejects.
func TestCheckerWorkers(t *testing.T) {
	const w1, w2 = 1<<30 + 2, 1<<30 + 3
	tests := []struct {
		name  string
		lines []ln
		want  []string
	}{
		{name: "gone in time", lines: []ln{
			{"start", "a", "5", pidA, 0, ""}, {"spawned", "a", "5", pidA, 1, "1073741826 setsid"},
			{"worker", "a", "5", w1, 2, "setsid"}, {"worker", "a", "5", w1, 19, "setsid"},
			{"exit", "a", "5", pidA, 10, "-9"},
			{"start", "b", "7", pidB, 20, ""}, {"worker", "b", "7", w2, 21, "daemon"}}},
		{name: "worker at the next term's first line", lines: []ln{
			{"start", "a", "5", pidA, 0, ""}, {"worker", "a", "5", w1, 2, "daemon"}, {"exit", "a", "5", pidA, 10, "-9"},
			{"start", "b", "7", pidB, 20, ""}, {"worker", "a", "5", w1, 20, "daemon"}},
			want: []string{"overlap: [a worker daemon token=5", "0s after the later term [b token=7"}},
		{name: "worker after the next term wrote", lines: []ln{
			{"start", "a", "5", pidA, 0, ""}, {"worker", "a", "5", w1, 2, "group"},
			{"start", "b", "7", pidB, 20, ""}, {"beat", "b", "7", pidB, 25, ""}, {"worker", "a", "5", w1, 26, "group"}},
			want: []string{"overlap: [a worker group token=5", "rejected 1 writes of children that were never paused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(t)
			appendLines(t, c.logPath, tt.lines...)
			c.mustSync()
			wantErrs(t, c.verify(), tt.want...)
			if len(c.j.workers) == 0 || c.j.workers[0].run != c.j.runs[0] {
				t.Errorf("workers %+v: want the first one tied to the first run", c.j.workers)
			}
		})
	}
}

// A worker line of a token no child started with is a broken log.
func TestCheckerWorkerWithoutRun(t *testing.T) {
	c := testCluster(t)
	appendLines(t, c.logPath, ln{"worker", "a", "5", pidA, 2, "group"})
	if err := c.j.sync(); err == nil {
		t.Fatal("sync accepted a worker line before any start line of its token")
	}
}

// A paused child's workers pause with it: their lines after the resume are
// its stale window (judged by the fence), not an overlap; a worker line
// stamped before the resume and after the next term began still is one.
func TestCheckerPausedWorkers(t *testing.T) {
	const w1 = 1<<30 + 2
	c := testCluster(t)
	appendLines(t, c.logPath, ln{"start", "a", "5", pidA, 0, ""}, ln{"worker", "a", "5", w1, 5, "setsid"})
	c.mustSync()
	p := c.j.paused(c.j.run(pidA), at(6), at(4000))
	appendLines(t, c.logPath,
		ln{"start", "b", "7", pidB, 2000, ""},
		ln{"worker", "a", "5", w1, 4001, "setsid"}, ln{"worker", "a", "5", w1, 4003, "setsid"},
		ln{"beat", "b", "7", pidB, 4005, ""})
	c.mustSync()
	wantErrs(t, c.verify())
	if p.staleLines != 2 || p.rejected != 2 || p.window() != 3*time.Millisecond {
		t.Errorf("pause %+v, window %s: want the worker's two stale lines", *p, p.window())
	}
	if end := c.j.treeEnd(c.j.run(pidA)); !end.Equal(at(5)) {
		t.Errorf("tree end %s, want the worker's last line before the pause", end)
	}
	appendLines(t, c.logPath, ln{"worker", "a", "5", w1, 2500, "setsid"}) // stamped while the next term ran
	c.mustSync()
	wantErrs(t, c.verify(), "overlap: [a worker setsid token=5")
}

// A worker process alive after the next term began is an orphan: counted
// once, reported and killed. A process that merely has a worker's old pid
// (another environment) is not.
func TestCheckerOrphans(t *testing.T) {
	c := testCluster(t)
	start := func(env ...string) *exec.Cmd {
		cmd := exec.Command("sleep", "1000")
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	orphan := start("RECORD_LOG="+c.logPath, "RECORD_ROLE=daemon", "ELECTD_ID=a", "ELECTD_FENCING_TOKEN=5")
	stranger := start("RECORD_LOG="+c.logPath, "RECORD_ROLE=daemon", "ELECTD_ID=a", "ELECTD_FENCING_TOKEN=6")
	appendLines(t, c.logPath,
		ln{"start", "a", "5", pidA, 0, ""},
		ln{"worker", "a", "5", orphan.Process.Pid, 1, "daemon"},
		ln{"worker", "a", "5", stranger.Process.Pid, 1, "daemon"}, // its pid, not its process
		ln{"exit", "a", "5", pidA, 10, "-9"})
	c.mustSync()
	wantErrs(t, c.verify()) // the term has not ended: no orphans yet
	appendLines(t, c.logPath, ln{"start", "b", "7", pidB, 20, ""})
	c.mustSync()
	wantErrs(t, c.verify(), "orphan: a worker daemon token=5 pid="+strconv.Itoa(orphan.Process.Pid))
	if c.orphans != 1 {
		t.Fatalf("%d orphans, want 1", c.orphans)
	}
	if err := orphan.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("the orphan was not killed: %v", err)
	}
	wantErrs(t, c.verify())
	if c.orphans != 1 || stranger.ProcessState != nil {
		t.Fatalf("%d orphans after a second check, stranger %v: want 1 and the stranger alive", c.orphans, stranger.ProcessState)
	}
}

// A line torn by its writer's SIGKILL is dropped and accounted for, with the
// offset where it broke off; the line written after it counts.
func TestCheckerTornLine(t *testing.T) {
	c := testCluster(t)
	appendLines(t, c.logPath, ln{"start", "a", "5", pidA, 0, ""})
	f, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := f.Seek(0, io.SeekEnd)
	if _, err := f.WriteString("beat a 5 1073741824 17000"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	c.mustSync() // the fragment waits for a newline
	appendLines(t, c.logPath, ln{"start", "b", "7", pidB, 20, ""}, ln{"beat", "b", "7", pidB, 25, ""})
	c.mustSync()
	wantErrs(t, c.verify())
	if len(c.j.torn) != 1 || c.j.torn[0].fragment != "beat a 5 1073741824 17000" || c.j.torn[0].end != before+25 {
		t.Fatalf("torn %+v, want the fragment ending at %d", c.j.torn, before+25)
	}
	if len(c.j.runs) != 2 || !c.j.runs[1].End().Equal(at(25)) || c.j.lines != 3 { // the fragment and the line after it are one line of the file
		t.Fatalf("runs %v after %d lines", c.j.runs, c.j.lines)
	}
}
