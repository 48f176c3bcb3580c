package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// treeChild writes a child whose main process starts three workers — one in
// its process group, one that calls setsid, one daemonised by a double fork
// — and with title a fourth: a daemon that sets its process title (see
// titledC), waits until each has written its host pid (the first field of
// /proc/self/stat, read through the host's /proc, so it holds inside a PID
// namespace too) to pidFile, and then SIGKILLs itself, as the OOM killer
// would (or, without exitMain, sleeps). With ignoreTerm the workers ignore
// SIGTERM.
func treeChild(t *testing.T, ignoreTerm, exitMain, title bool) (cmd []string, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "pids")
	trap, workers, titled := "", 3, ""
	if ignoreTerm {
		trap = "trap '' TERM\n"
	}
	if title {
		workers++
		titled = titledDaemon(t, dir) + " " + pidFile + " &\n" // it forks: its parent exits at once
	}
	worker := filepath.Join(dir, "worker.sh")
	writeScript(t, worker, "#!/bin/sh\n"+trap+"read p rest < /proc/self/stat\necho \"$p\" >> "+pidFile+"\nexec sleep 1000\n")
	end := "kill -9 $$\n"
	if !exitMain {
		end = "exec sleep 1000\n"
	}
	main := filepath.Join(dir, "main.sh")
	writeScript(t, main, "#!/bin/sh\n"+trap+
		worker+" &\n"+ // in the group
		"setsid "+worker+" &\n"+ // its own session
		"sh -c 'setsid "+worker+" &' &\n"+ // double fork: the middle shell exits at once
		titled+
		"while [ \"$(cat "+pidFile+" 2>/dev/null | wc -l)\" -lt "+strconv.Itoa(workers)+" ]; do sleep 0.01; done\n"+
		end)
	return []string{main}, pidFile
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// treePids reads the workers' pids; it waits until all of them (three, or
// four with the title daemon) are there.
func treePids(t *testing.T, pidFile string) []int {
	t.Helper()
	var pids []int
	want := 3
	if titlePid(pidFile) != -1 {
		want++
	}
	waitFor(t, strconv.Itoa(want)+" worker pids in "+pidFile, func() bool {
		pids = readPids(pidFile)
		return len(pids) == want
	})
	t.Cleanup(func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	return pids
}

// readPids reads the pids written to path so far.
func readPids(path string) []int {
	b, _ := os.ReadFile(path)
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// aliveOf returns the pids that still run (zombies do not).
func aliveOf(pids []int) []int {
	var alive []int
	for _, p := range pids {
		if st, err := readStat(p); err == nil && st.state != 'Z' && st.state != 'X' {
			alive = append(alive, p)
		}
	}
	return alive
}

// treeHarness grants terms whose Resign records which workers were still
// alive at the moment of the resign: the moment a successor may take over.
type treeHarness struct {
	*harness
	mu         sync.Mutex
	pidFile    string
	aliveAtEnd [][]int
}

func newTreeHarness(t *testing.T, mode Containment, onExit OnExit, ignoreTerm, exitMain, title bool) *treeHarness {
	t.Helper()
	needMode(t, mode)
	cmd, pidFile := treeChild(t, ignoreTerm, exitMain, title)
	th := &treeHarness{pidFile: pidFile}
	th.harness = newHarness(t, func(c *Config) {
		c.Command, c.Containment, c.OnExit = cmd, mode, onExit
		c.Logger = testLogger(t)
	})
	return th
}

func (th *treeHarness) grant(t *testing.T, token uint64) *elector.Deadline {
	t.Helper()
	dl := elector.NewDeadline(th.clk, th.timing, th.clk.Now())
	term := elector.NewTerm(elector.Leader{ID: "me", Token: token, Since: th.clk.Now()}, dl,
		func(context.Context) error {
			alive := aliveOf(readPids(th.pidFile))
			for _, p := range alive { // for the failure's message
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
				t.Logf("alive at the resign: %s (we are %d, group %d)", b, os.Getpid(), syscall.Getpgrp())
			}
			th.mu.Lock()
			th.aliveAtEnd = append(th.aliveAtEnd, alive)
			th.mu.Unlock()
			th.resigns <- struct{}{}
			return nil
		})
	th.el.terms <- term
	return dl
}

func (th *treeHarness) awaitResign(t *testing.T) []int {
	t.Helper()
	select {
	case <-th.resigns:
	case <-time.After(testDeadline):
		t.Fatal("the term was not given up")
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.aliveAtEnd[len(th.aliveAtEnd)-1]
}

func (th *treeHarness) cfgBackoff() time.Duration { return th.sup.cfg.RestartBackoff }

// checkGone fails the test unless alive (the workers alive at the moment
// the term ended) is what mode promises: none; under pgroup, when the sweep
// must spare strangers (orphanRule: electd is PID 1 or inherited
// children), the title daemon, the documented limit (it left the group and
// overwrote its environment, ELECTD_FENCING_TOKEN with it, and its parent
// has exited, so the sweep cannot tell it from a stranger).
func checkGone(t *testing.T, mode Containment, pidFile, when string, alive, pids []int) {
	t.Helper()
	var want []int
	if title := titlePid(pidFile); mode == ContainPgroup && orphanRule.strangers != "" && title != -1 {
		want = []int{title}
	}
	if !slices.Equal(alive, want) {
		t.Fatalf("%s: workers %v of %v alive %s, want %v", mode, alive, pids, when, want)
	}
	if len(want) > 0 {
		t.Logf("%s: the title daemon %d escaped, as documented where strangers are spared (%s)", mode, want[0], orphanRule.strangers)
	}
}

// TestTreeGoneBeforeResign: the child's main process is SIGKILLed while its
// workers (in the group, setsid'd, daemonised, titled) run; whatever
// --on-exit says, not one worker is alive when the term is given up (see
// checkGone for pgroup's one exception).
func TestTreeGoneBeforeResign(t *testing.T) {
	forModes(t, modes, func(t *testing.T, mode Containment) {
		for _, onExit := range []OnExit{OnExitResign, OnExitExit} {
			t.Run(string(onExit), func(t *testing.T) {
				th := newTreeHarness(t, mode, onExit, true, true, true)
				th.grant(t, 20)
				pids := treePids(t, th.pidFile)
				checkGone(t, mode, th.pidFile, "when the term was given up", th.awaitResign(t), pids)
				waitFor(t, "child exit recorded", func() bool { return th.ev.has("child_exited:signaled") })
			})
		}
	})
}

// TestRestartAfterTreeGone: under --on-exit restart, the old tree is gone
// before the next child starts.
func TestRestartAfterTreeGone(t *testing.T) {
	forModes(t, modes, func(t *testing.T, mode Containment) {
		th := newTreeHarness(t, mode, OnExitRestart, false, true, true)
		th.grant(t, 21)
		first := treePids(t, th.pidFile)
		waitFor(t, "the first child's exit", func() bool { return th.ev.has("child_exited:signaled") })
		// Armed: the deadline's timer, the stop timer, and the restart.
		waitFor(t, "the restart armed", func() bool { return th.clk.Pending() == 3 })
		alive := aliveOf(first)
		th.clk.Advance(th.cfgBackoff())
		waitFor(t, "a restart", func() bool { return th.ev.count("child_started") == 2 })
		checkGone(t, mode, th.pidFile, "when the restart was armed", alive, first)
	})
}

// TestDeadlineKillsTermIgnoringTree: a main process and workers that all
// ignore SIGTERM are SIGKILLed, every one, when the stop-by moment comes,
// before the term is given up.
func TestDeadlineKillsTermIgnoringTree(t *testing.T) {
	forModes(t, modes, func(t *testing.T, mode Containment) {
		th := newTreeHarness(t, mode, OnExitResign, true, false, true)
		th.grant(t, 22)
		pids := treePids(t, th.pidFile)
		// The tree writes its pids before the start returns to the
		// term: a deadline then makes it a late start, killed whole but
		// not as a child that ran (1 of 300 runs beside two busy loops).
		waitFor(t, "the child started", func() bool { return th.ev.count("child_started") == 1 })
		th.clk.Advance(th.timing.Window())
		checkGone(t, mode, th.pidFile, "when the term was given up", th.awaitResign(t), pids)
		waitFor(t, "lost:deadline, child killed", func() bool {
			return th.ev.has("lost:deadline") && th.ev.has("child_exited:killed")
		})
	})
}

// TestSuspendEndsTerm drives the boot clock apart from the monotonic one, as
// a host suspension does.
func TestSuspendEndsTerm(t *testing.T) {
	const stopTimeout = time.Second // newHarness's
	tests := []struct {
		name    string
		suspend time.Duration
		want    string
	}{
		{name: "suspended past the lease", suspend: 20 * time.Second, want: "lost:suspended"},
		{name: "suspended more than the bound, lease still running", suspend: SuspendBound + time.Millisecond, want: "lost:suspended"},
		{name: "suspended within the bound", suspend: SuspendBound, want: "lost:deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := newTreeHarness(t, ContainPgroup, OnExitResign, true, false, false)
			dl := th.grant(t, 23)
			pids := treePids(t, th.pidFile)
			stopBy := StopBy(dl.ValidUntil(), stopTimeout)
			th.clk.Suspend(tt.suspend)
			// Run the monotonic clock to the real stop-by moment, where the
			// stop timer on the boot clock fires, then on in small steps
			// until the term ends.
			th.clk.Advance(max(0, stopBy.Sub(th.clk.Now())-tt.suspend))
			waitFor(t, "the term ended", func() bool {
				if !th.sup.Leading() {
					return true
				}
				// Not up to ValidUntil: the lease's own expiry would end
				// the term (reason deadline) while its tree is stopping.
				if th.clk.Now().Add(10 * time.Millisecond).Before(dl.ValidUntil()) {
					th.clk.Advance(10 * time.Millisecond)
				}
				return false
			})
			if alive := th.awaitResign(t); len(alive) > 0 {
				t.Fatalf("workers %v of %v alive when the term was given up", alive, pids)
			}
			waitFor(t, tt.want, func() bool { return th.ev.has(tt.want) })
			switch {
			case tt.want == "lost:suspended" && !th.ev.has("child_exited:killed"):
				t.Fatalf("after a suspension the tree must be SIGKILLed at once; events %v", th.ev.events)
			case tt.want == "lost:deadline" && th.clk.Now().Before(stopBy):
				t.Fatalf("a suspension within the bound ended the term early, at %v before stop-by", stopBy.Sub(th.clk.Now()))
			}
		})
	}
}

// TestNoStartAfterTheEnd: a term that is already over when it is won, or
// whose stop-by moment has passed, never starts the child.
func TestNoStartAfterTheEnd(t *testing.T) {
	tests := []struct {
		name string
		term func(h *harness) *elector.Term
		want string
	}{
		{name: "ended", want: "lost:key_lost", term: func(h *harness) *elector.Term {
			dl := elector.NewDeadline(h.clk, h.timing, h.clk.Now())
			dl.End(elector.ErrLeadershipLost)
			return elector.NewTerm(elector.Leader{ID: "me", Token: 30}, dl, func(context.Context) error { return nil })
		}},
		{name: "past stop-by", want: "lost:deadline", term: func(h *harness) *elector.Term {
			// Renewed so long ago that only 100 ms are left: less than
			// StopTimeout + StopMargin.
			sent := h.clk.Now().Add(-h.timing.Window() + 100*time.Millisecond)
			dl := elector.NewDeadline(h.clk, h.timing, sent)
			return elector.NewTerm(elector.Leader{ID: "me", Token: 31}, dl, func(context.Context) error { return nil })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Command = []string{"sleep", "1000"} })
			h.el.terms <- tt.term(h)
			waitFor(t, tt.want, func() bool { return h.ev.has(tt.want) })
			if h.ev.has("child_started") {
				t.Fatalf("a child was started in a term that was over: %v", h.ev.events)
			}
		})
	}
}

// TestNoRestartAfterTheEnd: a restart that falls due together with the
// term's end never starts a child.
func TestNoRestartAfterTheEnd(t *testing.T) {
	for range 5 { // the select picks among ready cases at random
		h := newHarness(t, func(c *Config) {
			c.Command, c.OnExit = []string{"sh", "-c", "exit 3"}, OnExitRestart
			c.RestartBackoff = 9 * time.Second
		})
		h.grant(32)
		waitFor(t, "the child's exit", func() bool { return h.ev.has("child_exited:failure") })
		// Armed: the deadline's timer, the stop timer, and the restart.
		waitFor(t, "the restart armed", func() bool { return h.clk.Pending() == 3 })
		// The stop-by moment (8.69 s) and then the restart (9 s) come in
		// one step, before ValidUntil (9.89 s).
		h.clk.Advance(9500 * time.Millisecond)
		waitFor(t, "lost:deadline", func() bool { return h.ev.has("lost:deadline") })
		if starts := h.ev.count("child_started"); starts != 1 {
			t.Fatalf("%d starts, want 1: a restart ran past the term's end", starts)
		}
	}
}

// TestRunOnceAfterExitAfterTree: lock's afterExit (where --once-per records
// the run) runs only once every worker of the tree is gone.
func TestRunOnceAfterExitAfterTree(t *testing.T) {
	forModes(t, modes, func(t *testing.T, mode Containment) {
		cmd, pidFile := treeChild(t, true, true, true)
		o := newOnceRun(t, cmd...)
		o.sup.cfg.Containment = mode
		var alive []int
		err := o.sup.RunOnce(context.Background(), o.term, func(context.Context, ExitStatus) {
			alive = aliveOf(treePids(t, pidFile))
		})
		var xe *ExitError
		if !errors.As(err, &xe) || xe.Code() != 137 {
			t.Fatalf("RunOnce = %v, want ExitError 137", err)
		}
		checkGone(t, mode, pidFile, "when the run was recorded", alive, nil)
	})
}

// TestSuspendBeforeHold: a suspension between the grant's acknowledgement
// and the term reaching hold (Campaign still returning) is seen too: the
// child never starts.
func TestSuspendBeforeHold(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Command = []string{"sleep", "1000"} })
	dl := elector.NewDeadline(h.clk, h.timing, h.clk.Now())
	term := elector.NewTerm(elector.Leader{ID: "me", Token: 40}, dl, func(context.Context) error { return nil })
	h.clk.Suspend(2 * h.timing.TTL)
	h.el.terms <- term
	waitFor(t, "lost:suspended", func() bool { return h.ev.has("lost:suspended") })
	if h.ev.has("child_started") {
		t.Fatalf("a child started after a suspension longer than the lease: %v", h.ev.events)
	}
}

// TestTreeZombieLeader: a worker that left the group and whose main thread
// exited (pthread_exit) shows as a zombie in /proc while its other thread
// runs on; pgroup's sweep must still count and kill it.
func TestTreeZombieLeader(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP: no python3 to build a zombie leader with a live thread")
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	worker := filepath.Join(dir, "worker.py")
	writeScript(t, worker, "import os, threading, time, ctypes\nos.setsid()\n"+
		"threading.Thread(target=lambda: [time.sleep(0.005) for _ in iter(int, 1)]).start()\n"+
		"open('"+pidFile+"', 'a').write(open('/proc/self/stat').read().split()[0] + '\\n')\n"+
		"ctypes.CDLL(None).pthread_exit(None)\n")
	main := filepath.Join(dir, "main.sh")
	writeScript(t, main, "#!/bin/sh\n"+py+" "+worker+" &\n"+
		"while [ ! -s "+pidFile+" ]; do sleep 0.01; done\nkill -9 $$\n")
	th := &treeHarness{pidFile: pidFile}
	th.harness = newHarness(t, func(c *Config) {
		c.Command, c.Containment, c.Logger = []string{main}, ContainPgroup, testLogger(t)
	})
	th.grant(t, 41)
	var pids []int
	waitFor(t, "the worker's pid", func() bool { pids = readPids(pidFile); return len(pids) == 1 })
	killAtCleanup(t, pids[0], syscall.SIGKILL)
	th.awaitResign(t)
	// Checked here without the code under test: any thread of it not a
	// zombie (the third field of its stat).
	dir = "/proc/" + strconv.Itoa(pids[0]) + "/task/"
	tasks, _ := os.ReadDir(dir)
	for _, task := range tasks {
		if b, err := os.ReadFile(dir + task.Name() + "/stat"); err == nil {
			if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] != "Z" && f[0] != "X" {
				t.Fatalf("thread %s of the zombie-leader worker %d still runs after the term was given up", task.Name(), pids[0])
			}
		}
	}
}

// TestTreeSparesStrangers: as a subreaper (or PID 1) electd inherits
// orphans that are not the child's; pgroup's sweep must leave them alone:
// an orphan of a process that electd's own code started stays in electd's
// process group; as PID 1, one that left it shows an environment without
// the child's mark.
func TestTreeSparesStrangers(t *testing.T) {
	tests := []struct {
		name      string
		strangers string // orphanRule.strangers for the test
		script    string
	}{
		{name: "in electd's group", script: "sleep 1000 >/dev/null 2>&1 & echo $!"},
		{name: "PID 1, unmarked, own session", strangers: "as PID 1", script: "setsid sleep 1000 >/dev/null 2>&1 & echo $!"},
		{name: "inherited children, unmarked, own session", strangers: "inherited a child", script: "setsid sleep 1000 >/dev/null 2>&1 & echo $!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.strangers != "" {
				useRule(t, sweepRule{strangers: tt.strangers})
			}
			th := newTreeHarness(t, ContainPgroup, OnExitResign, false, false, false)
			th.grant(t, 42)
			pids := treePids(t, th.pidFile)
			// A stranger orphaned to this process after the child started.
			cmd := exec.Command("sh", "-c", tt.script)
			cmd.Env = []string{"A=1"}
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			stranger, err := strconv.Atoi(strings.TrimSpace(string(out)))
			if err != nil {
				t.Fatal(err)
			}
			killAtCleanup(t, stranger, syscall.SIGKILL)
			waitFor(t, "the stranger orphaned to us, running sleep", func() bool {
				st, err := readStat(stranger)
				comm, _ := os.ReadFile("/proc/" + strconv.Itoa(stranger) + "/comm")
				return err == nil && st.ppid == os.Getpid() && string(comm) == "sleep\n"
			})
			if err := th.sup.Resign(context.Background()); err != nil {
				t.Fatal(err)
			}
			if alive := th.awaitResign(t); len(alive) > 0 {
				t.Fatalf("workers %v of %v alive when the term was given up", alive, pids)
			}
			if len(aliveOf([]int{stranger})) != 1 {
				t.Fatalf("the sweep killed %d, an orphan that was not the child's", stranger)
			}
		})
	}
}

// titledC is a daemon that sets its process title as setproctitle does: it
// forks (its parent exits at once, so it is orphaned), leaves the process
// group (setsid), overwrites its argv and environment, which lie one after
// the other, with the title, and then appends its host pid (from
// /proc/self/stat) to the file argv[1] and to argv[1].title. Its
// /proc/PID/cmdline is then the title and its /proc/PID/environ empty. It
// ignores SIGTERM if its parent did (SIG_IGN is inherited).
const titledC = `#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
extern char **environ;
static void appendPid(const char *path, int pid) {
	char buf[32];
	int n = snprintf(buf, sizeof buf, "%d\n", pid);
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
	write(fd, buf, n);
	close(fd);
}
int main(int argc, char **argv) {
	char pids[4096], title[4200];
	if (argc < 2 || fork() != 0)
		return 0;
	setsid();
	snprintf(pids, sizeof pids, "%s", argv[1]);
	snprintf(title, sizeof title, "%s.title", argv[1]);
	char *start = argv[0], *end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
	for (char **e = environ; *e; e++)
		if (*e == end)
			end = *e + strlen(*e) + 1;
	memset(start, 0, end - start);
	snprintf(start, end - start, "titled: worker");
	environ = NULL;
	int pid = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	if (f == NULL || fscanf(f, "%d", &pid) != 1)
		return 1;
	fclose(f);
	appendPid(title, pid);
	appendPid(pids, pid);
	for (;;)
		pause();
}
`

var (
	titledOnce sync.Once
	titledBin  string
	titledErr  error
)

// titledDaemon copies titledC's program, built once per test binary, into
// dir, and returns its path; it skips the test, loudly, without a C
// compiler.
func titledDaemon(t *testing.T, dir string) string {
	t.Helper()
	titledOnce.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			titledErr = err
			return
		}
		d, err := os.MkdirTemp("", "electd-titled-")
		if err != nil {
			titledErr = err
			return
		}
		src := filepath.Join(d, "titled.c")
		titledBin = filepath.Join(d, "titled")
		if titledErr = os.WriteFile(src, []byte(titledC), 0o644); titledErr != nil {
			return
		}
		if out, err := exec.Command(cc, "-O2", "-o", titledBin, src).CombinedOutput(); err != nil {
			titledErr = fmt.Errorf("cc: %w\n%s", err, out)
		}
	})
	if titledErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the title daemon: %v", titledErr)
		}
		t.Skipf("SKIP: cannot build the title daemon: %v", titledErr)
	}
	bin := filepath.Join(dir, "titled")
	b, err := os.ReadFile(titledBin)
	if err == nil {
		err = os.WriteFile(bin, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// titlePid is the title daemon's host pid, once it has written it; -1 if
// the tree of pidFile has none, 0 if it has not written it yet.
func titlePid(pidFile string) int {
	if _, err := os.Stat(filepath.Join(filepath.Dir(pidFile), "titled")); err != nil {
		return -1
	}
	if pids := readPids(pidFile + ".title"); len(pids) == 1 {
		return pids[0]
	}
	return 0
}
