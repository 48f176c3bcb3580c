package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// newPreparedInit waits for the namespace init that this process prepares
// next (a child of ours, not in seen, whose argv[0] is the init's and that
// has a command) and returns its pid.
func newPreparedInit(t *testing.T, seen map[int]bool) int {
	t.Helper()
	var pid int
	waitUntil(t, testDeadline, func() bool {
		pids, _ := childPids()
		for _, p := range pids {
			if seen[p] {
				continue
			}
			if _, cmd := initOf(p); cmd {
				pid = p
				return true
			}
		}
		return false
	}, "a prepared namespace init")
	return pid
}

// holdBehindChild puts every thread of process pid on CPU 0 under
// SCHED_FIFO: what it forks inherits both, so the command it starts, while
// it runs without blocking, keeps the init from running on (a host busy
// with the command). It skips the test where SCHED_FIFO is not allowed.
func holdBehindChild(t *testing.T, pid int) {
	t.Helper()
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	for range 2 { // a thread started meanwhile inherits from its creator
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*")
		for _, task := range tasks {
			tid, _ := strconv.Atoi(filepath.Base(task))
			if err := unix.SchedSetaffinity(tid, &cpu0); err != nil {
				t.Skipf("SKIP: sched_setaffinity: %v", err)
			}
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: 1 /* SCHED_FIFO */, Priority: 1}
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
				if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
					t.Skipf("SKIP: SCHED_FIFO: %v", err)
				}
				t.Fatalf("sched_setattr %d: %v", tid, err)
			}
		}
	}
}

// TestPreparedInitGoneAfterExecNoSecondRun: when the prepared init dies
// (the OOM killer, an operator's kill -9) after it exec'd the term's
// command but before it reported it started, the command did run, with the
// term's token; a second tree must not be started for the same term as if
// nothing had run (Supervisor.start's fallback on errInitGone, whose
// "safe: nothing of this one is left" holds for the tree but not for what
// its command already did). The init is held behind its command on one CPU
// (SCHED_FIFO, equal priority) so that it cannot report the start while
// the command spins; once the command has written its line the init is
// SIGKILLed.
func TestPreparedInitGoneAfterExecNoSecondRun(t *testing.T) {
	needMode(t, ContainPidns)
	for attempt := 1; ; attempt++ {
		if attempt == 6 {
			t.Skip("SKIP: the init always reported the start before it was killed")
		}
		dir := t.TempDir()
		ran, release := filepath.Join(dir, "ran"), filepath.Join(dir, "release")
		seen := initsNow()
		campaigning := make(chan struct{}, 1)
		h := newHarness(t, func(c *Config) {
			c.Command = []string{"/bin/sh", "-c", `echo "ran $ELECTD_FENCING_TOKEN" >> ` + ran +
				`; while [ ! -e ` + release + ` ]; do :; done; exec sleep 1000`}
			c.Containment, c.Logger = ContainPidns, testLogger(t)
			c.Elector.(*fakeElector).campaigning = campaigning
		})
		<-campaigning
		pid := newPreparedInit(t, seen)
		killAtCleanup(t, pid, syscall.SIGKILL)
		holdBehindChild(t, pid)
		h.grant(7)
		waitUntil(t, testDeadline, func() bool {
			b, _ := os.ReadFile(ran)
			return strings.Contains(string(b), "\n")
		}, "the command to run")
		// The command runs; its init, behind it, is killed.
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("SIGKILL the init: %v", err)
		}
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the term given up, or a child started", func() bool {
			select {
			case <-h.resigns:
				return true
			default:
			}
			return h.ev.has("child_started")
		})
		waitFor(t, "the first init gone", func() bool { return procGone(pid) })
		b, _ := os.ReadFile(ran)
		runs := strings.Count(string(b), "ran 7\n")
		if runs == 1 && h.ev.has("child_started") {
			// The init reported the start before it was killed: electd
			// saw that run; this proves nothing.
			t.Logf("attempt %d: the start was reported before the init was killed; again", attempt)
			h.cancel()
			h.runReturned(t, testDeadline, "Run did not return")
			continue
		}
		if runs != 1 {
			t.Fatalf("the command ran %d times in one term (token 7): %q; events %v", runs, b, h.ev.events)
		}
		return
	}
}

// TestPreparedInitGoneWhileIdleStartsNewInit: a prepared init that died
// while it waited (before the go message) ran nothing, and the term starts
// its command with a new init.
func TestPreparedInitGoneWhileIdleStartsNewInit(t *testing.T) {
	needMode(t, ContainPidns)
	ran := filepath.Join(t.TempDir(), "ran")
	seen := initsNow()
	campaigning := make(chan struct{}, 1)
	h := newHarness(t, func(c *Config) {
		c.Command = []string{"/bin/sh", "-c", `echo "ran $ELECTD_FENCING_TOKEN" >> ` + ran + `; exec sleep 1000`}
		c.Containment, c.Logger = ContainPidns, testLogger(t)
		c.Elector.(*fakeElector).campaigning = campaigning
	})
	<-campaigning
	pid := newPreparedInit(t, seen)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL the prepared init: %v", err)
	}
	waitFor(t, "the prepared init reaped", func() bool { return procGone(pid) })
	h.grant(8)
	waitFor(t, "the child started", func() bool { return h.ev.has("child_started") })
	waitFor(t, "the command to run", func() bool {
		b, _ := os.ReadFile(ran)
		return string(b) == "ran 8\n"
	})
}
