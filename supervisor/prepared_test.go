package supervisor

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/test/proc"
)

// takePid starts a process that leads a process group of its own and has
// pid (as root, by ns_last_pid), or returns nil if another process of the
// host took that pid first.
func takePid(t *testing.T, pid int) *exec.Cmd {
	t.Helper()
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
		t.Skipf("SKIP: cannot choose the next pid: %v", err)
	}
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if cmd.Process.Pid != pid {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil
	}
	return cmd
}

// strangerSurvived ends the stranger with SIGTERM and reports whether that
// is what ended it: a SIGKILL sent before (by Release) would have ended it
// first.
func strangerSurvived(t *testing.T, cmd *exec.Cmd) (bool, error) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ws.Signaled() && ws.Signal() == syscall.SIGTERM, err
}

// killAndTakePid kills the prepared init pid (as someone else would: the
// OOM killer), waits until it is reaped, and has a stranger take its pid
// (takePid); nil if another process took it first.
func killAndTakePid(t *testing.T, pid int) *exec.Cmd {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, testDeadline, func() bool { return procGone(pid) }, "prepared init %d reaped", pid)
	return takePid(t, pid)
}

// wantSpared fails the test unless stranger, which took the pid of the dead
// prepared init, survived what (the init's release).
func wantSpared(t *testing.T, stranger *exec.Cmd, what string, pid int) {
	t.Helper()
	if survived, err := strangerSurvived(t, stranger); !survived {
		t.Fatalf("%s of the dead prepared init killed pid %d, another process's group (%v)", what, pid, err)
	}
}

// TestReleaseSparesTheInitsPid: a candidate's prepared namespace init dies
// (killed by someone else, the OOM killer) while it waits; electd's waiter
// reaps it, and its pid is free. Then the loop ends (Run's ctx ended: electd
// shuts down; or lock gave up the wait) and ReleasePrepared SIGKILLs the
// init's process group by its number, -pid: a process that took the pid
// meanwhile, leading a group of its own, is killed with its whole group.
// The prepared init's waiter has reaped it (it only waits for Begin or
// Release before it reports the end), so nothing here is ours to kill.
func TestReleaseSparesTheInitsPid(t *testing.T) {
	needMode(t, ContainPidns)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root: cannot choose the next pid")
	}
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Skip("SKIP: the init's pid was always taken by another process first")
		}
		campaigning := make(chan struct{}, 1)
		h := newHarness(t, func(c *Config) {
			c.Command = []string{"sleep", "1000"}
			c.Containment, c.Logger = ContainPidns, testLogger(t)
			c.Elector.(*fakeElector).campaigning = campaigning
		})
		<-campaigning // the init is prepared, and the candidate waits
		h.sup.mu.Lock()
		pid := h.sup.prepared.Pid()
		h.sup.mu.Unlock()

		stranger := killAndTakePid(t, pid)
		if stranger == nil {
			t.Logf("attempt %d: pid %d was taken by another process; again", attempt, pid)
			h.cancel()
			h.runReturned(t, testDeadline, "Run did not return")
			continue
		}
		h.cancel() // electd shuts down: Run returns, and releases the init
		if err := h.runReturned(t, testDeadline, "Run did not return"); err != nil {
			t.Errorf("Run: %v", err)
		}
		wantSpared(t, stranger, "Run's release", pid)
		return
	}
}

// TestPrepareChildReleaseSparesTheInitsPid is the same at the Child's
// level: Release of a prepared init that died and was reaped.
func TestPrepareChildReleaseSparesTheInitsPid(t *testing.T) {
	needMode(t, ContainPidns)
	if os.Geteuid() != 0 {
		t.Skip("SKIP: not root: cannot choose the next pid")
	}
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Skip("SKIP: the init's pid was always taken by another process first")
		}
		c, err := PrepareChild(ChildSpec{Path: "/bin/true", Containment: ContainPidns}, testLogger(t), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		pid := c.Pid()
		stranger := killAndTakePid(t, pid)
		if stranger == nil {
			c.Release()
			continue
		}
		c.Release()
		if st := c.Exit(); st.Signal != syscall.SIGKILL {
			t.Errorf("the released init's status: %+v, want SIGKILL", st)
		}
		wantSpared(t, stranger, "Release", pid)
		return
	}
}

// TestRunReturnsWhilePreparing: electd is told to stop (Run's ctx ends)
// while the candidate prepares its child's init, and the init is slow to
// be ready (held stopped here, as by a loaded host or a slow disk). Run
// must return at once, as it does while it campaigns; it waited for the
// init's prepareTimeout (10 s), and a second Ctrl-C (Hurry) did not cut
// that short. lock's --wait is spent the same way.
func TestRunReturnsWhilePreparing(t *testing.T) {
	needMode(t, ContainPidns)
	for attempt := 0; ; attempt++ {
		if attempt == 10 {
			t.Skip("SKIP: the init was never caught before it was ready")
		}
		seen := initsNow()
		h := newHarness(t, func(c *Config) {
			c.Command = []string{"sleep", "1000"}
			c.Containment, c.Logger = ContainPidns, testLogger(t)
		})
		pid, _ := stopNewInit(t, seen, "/nonexistent")
		if n := proc.Writes(pid); n != 0 {
			// It has written its "ready" (its only write).
			t.Logf("attempt %d: init %d was caught once ready (%d writes); again", attempt, pid, n)
			h.cancel()
			h.runReturned(t, testDeadline, "Run did not return")
			continue
		}
		h.cancel()
		h.sup.Hurry() // and a second Ctrl-C
		h.runReturned(t, prepareTimeout/2, "Run did not return within %v of its ctx's end: it waits for the init %d it prepares", prepareTimeout/2, pid)
		return
	}
}
