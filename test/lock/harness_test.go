package lock

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/deathsig"
	"github.com/electd/electd/test/e2e/tree"
	"github.com/electd/electd/test/kit"
	pidwatch "github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

const (
	ttl         = 2 * time.Second
	stopTimeout = 500 * time.Millisecond

	runTimeout   = 15 * time.Second // a command starts, from any state
	exitTimeout  = 20 * time.Second // an electd exits, from any state
	goneTimeout  = 2 * time.Second  // a killed electd's child disappears
	logTailLines = 60               // of an electd's output, on failure
)

// harness is one scenario: a lock of its own, a record log shared by all
// its commands, and the processes it started.
type harness struct {
	t       *testing.T
	s       *store
	name    string // the lock's NAME
	dir     string
	logPath string
	procs   []*proc
}

// newHarness prepares a scenario on s. At cleanup it kills every process it
// started, checks that their commands died with them, and on failure
// prints their output and the record log.
func newHarness(t *testing.T, s *store) *harness {
	dir := t.TempDir()
	h := &harness{
		t: t, s: s, dir: dir,
		name:    "lock-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()),
		logPath: filepath.Join(dir, "record.log"),
	}
	t.Cleanup(h.cleanup)
	return h
}

func (h *harness) cleanup() {
	t := h.t
	for _, p := range h.procs {
		p.kill()
		for _, bad := range pidwatch.Crashes(p.output()) {
			t.Errorf("%s's output contains %q", p.id, bad)
		}
	}
	runs, err := record.ReadFile(h.logPath)
	if err != nil {
		t.Errorf("record log: %v", err)
	}
	for _, r := range runs {
		if !pidwatch.WaitGone(r.Pid, goneTimeout) && pidwatch.IsOurs(r.Pid, bin.Recorder) {
			t.Errorf("command %s outlived its electd by %s; killing it", r, goneTimeout)
			_ = syscall.Kill(r.Pid, syscall.SIGKILL)
		}
	}
	// Workers (RECORD_WORKERS) that outlived electd: whether that is a
	// failure is for the test to say; none may leak.
	for _, pid := range tree.Kill(runs, h.logPath, goneTimeout) {
		t.Logf("worker %d was still alive at the end of the test; killed it", pid)
	}
	if t.Failed() {
		for _, p := range h.procs {
			t.Log(p.tail())
		}
		t.Logf("runs in %s:\n%s", h.logPath, kit.Describe(runs))
	}
}

// opts are the differences between `electd lock` processes.
type opts struct {
	store   string   // --store host:port; empty: the server itself
	args    []string // flags before NAME
	env     []string // RECORD_* knobs and the like
	command []string // empty: the recorder
}

// lock starts `electd lock [flags] NAME -- COMMAND` as node id.
func (h *harness) lock(id string, o opts) *proc {
	h.t.Helper()
	addr := o.store
	if addr == "" {
		addr = h.s.Addr
	}
	args := []string{"lock", "--store", h.s.URL(addr), "--id", id, "--ttl", ttl.String(),
		"--stop-timeout", stopTimeout.String(), "--log-format", "json", "--log-level", "debug"}
	args = append(append(args, o.args...), h.name, "--")
	if len(o.command) == 0 {
		o.command = []string{bin.Recorder}
	}
	return h.start(id, append(args, o.command...), o.env)
}

// start runs electd with args and the test's environment less ELECTD_* and
// RECORD_* settings, plus RECORD_LOG and env. It is killed at cleanup.
func (h *harness) start(id string, args, env []string) *proc {
	h.t.Helper()
	p := &proc{t: h.t, id: id, logPath: filepath.Join(h.dir, fmt.Sprintf("%s-%d.log", id, len(h.procs)))}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		h.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin.Electd, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(pidwatch.BaseEnv("RECORD_LOG="+h.logPath), env...)
	if p.Process, err = deathsig.Start(cmd); err != nil { // dies with the test
		h.t.Fatalf("start %s: %v", id, err)
	}
	h.procs = append(h.procs, p)
	return p
}

// proc is one electd process.
type proc struct {
	t       *testing.T
	id      string
	logPath string // its stdout and stderr (and its command's)
	*deathsig.Process
}

// wait waits for electd to exit and returns its exit code (128+signal if a
// signal killed it).
func (p *proc) wait(within time.Duration) int {
	p.t.Helper()
	if !p.Wait(within) {
		p.t.Fatalf("%s (pid %d) has not exited after %s\n%s", p.id, p.Pid(), within, p.tail())
	}
	return p.ExitCode()
}

// mustExit waits for electd's exit and fails the test unless its code is want.
func (p *proc) mustExit(want int) {
	p.t.Helper()
	if code := p.wait(exitTimeout); code != want {
		p.t.Fatalf("%s exited with %d, want %d\n%s", p.id, code, want, p.tail())
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s to %s: %v", sig, p.id, err)
	}
}

// kill SIGKILLs electd (if still running) and waits until it is reaped.
func (p *proc) kill() {
	if !p.Exited() {
		_ = p.Cmd.Process.Kill()
	}
	<-p.Done()
}

func (p *proc) output() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// allLines are all of the process's output lines.
func (p *proc) allLines() []string {
	out := strings.TrimRight(p.output(), "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// lines are electd's output lines that are not JSON logs: its own
// one-line messages (errors, "already run") and its command's output.
func (p *proc) lines() []string {
	var out []string
	for l := range strings.SplitSeq(strings.TrimRight(p.output(), "\n"), "\n") {
		if !strings.HasPrefix(l, "{") {
			out = append(out, l)
		}
	}
	return out
}

// said fails the test unless one of electd's own lines contains every part.
func (p *proc) said(parts ...string) {
	p.t.Helper()
	for _, l := range p.lines() {
		if !strings.HasPrefix(l, "electd: ") {
			continue
		}
		if !slices.ContainsFunc(parts, func(s string) bool { return !strings.Contains(l, s) }) {
			return
		}
	}
	p.t.Fatalf("%s did not say %q:\n%s", p.id, parts, strings.Join(p.lines(), "\n"))
}

// tail is the end of the process's output, for failure messages.
func (p *proc) tail() string { return kit.Tail(p.id, p.logPath, logTailLines) }

// runs reads the record log, failing the test if it does not parse.
func (h *harness) runs() []record.Run { h.t.Helper(); return kit.Runs(h.t, h.logPath) }

// check proves the record log safe: no overlap, growing tokens.
func (h *harness) check() []record.Run {
	h.t.Helper()
	return kit.Check(h.t, h.logPath, record.Options{})
}

// poll is kit.Poll on the harness's test.
func (h *harness) poll(within time.Duration, what string, cond func() (bool, string)) {
	h.t.Helper()
	kit.Poll(h.t, within, what, cond)
}

// waitRun waits for a run of node's command and returns it.
func (h *harness) waitRun(node string) record.Run {
	h.t.Helper()
	return h.waitRunWithin(node, runTimeout)
}

func (h *harness) waitRunWithin(node string, within time.Duration) record.Run {
	h.t.Helper()
	var found record.Run
	h.poll(within, node+"'s command running", func() (bool, string) {
		runs := h.runs()
		for _, r := range runs {
			if r.Node == node {
				found = r
				return true, ""
			}
		}
		return false, "runs:\n" + kit.Describe(runs)
	})
	return found
}

// runOf returns the current state of the run with pid.
func (h *harness) runOf(pid int) record.Run { h.t.Helper(); return kit.RunOf(h.t, h.logPath, pid) }

// waitQueued waits until the store holds n candidates for the lock.
func (h *harness) waitQueued(n int) {
	h.t.Helper()
	h.poll(runTimeout, fmt.Sprintf("%d candidates in the store", n), func() (bool, string) {
		got := h.s.queued(h.t, h.name)
		return got == n, fmt.Sprintf("%d candidates", got)
	})
}

// ms renders a duration in milliseconds for logs.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// maxConcurrent is the largest number of runs alive at one instant.
func maxConcurrent(runs []record.Run) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range runs {
		edges = append(edges, edge{r.Start, +1}, edge{r.End(), -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	cur, most := 0, 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}
