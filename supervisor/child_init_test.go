package supervisor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// initOf reports whether process p is a namespace init (its argv[0] is
// the init's) and whether it was given a command (a probe has none). A
// process that is gone is no init.
func initOf(p int) (isInit, hasCommand bool) {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline") // unreadable: gone
	if !strings.HasPrefix(string(b), initArg0+"\x00") {
		return false, false
	}
	return true, len(b) > len(initArg0)+1
}

// holdStopped SIGSTOPs process p (a namespace init caught starting), has it
// killed at the test's end, and waits until it is stopped; false if p is
// gone already.
func holdStopped(t *testing.T, p int) bool {
	t.Helper()
	if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
		return false
	}
	killAtCleanup(t, p, syscall.SIGKILL, syscall.SIGCONT)
	waitUntil(t, testDeadline, func() bool {
		st, err := readStat(p)
		return err != nil || st.state == 'T'
	}, "init %d to stop", p)
	return true
}

// preparedInits lists our children that are prepared or running namespace
// inits (not probes).
func preparedInits() []int {
	var inits []int
	pids, _ := childPids()
	for _, p := range pids {
		if _, cmd := initOf(p); cmd {
			inits = append(inits, p)
		}
	}
	return inits
}

// TestPreparedInitRunsNothing: a prepared init runs nothing until Begin,
// Begin gives the command the term's environment, and Release of an unused
// one leaves nothing, not even a zombie.
func TestPreparedInitRunsNothing(t *testing.T) {
	forModes(t, nsModes, func(t *testing.T, mode Containment) {
		dir := t.TempDir()
		marker := filepath.Join(dir, "ran")
		spec := ChildSpec{Path: "/bin/sh", Args: []string{"-c", `echo "$ELECTD_FENCING_TOKEN" > ` + marker + `; exec sleep 1000`},
			Containment: mode}

		unused, err := PrepareChild(spec, testLogger(t), time.Now().Add(testDeadline))
		if err != nil {
			t.Fatal(err)
		}
		if kids := childrenOf(unused.Pid()); len(kids) > 0 {
			t.Fatalf("a prepared init has children %v before Begin", kids)
		}
		unused.Release()
		if !procGone(unused.Pid()) {
			t.Fatalf("init %d still exists (a zombie?) after Release", unused.Pid())
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the command of a released init ran")
		}

		c, err := PrepareChild(spec, testLogger(t), time.Now().Add(testDeadline))
		if err != nil {
			t.Fatal(err)
		}
		run := spec
		run.Env = []string{"ELECTD_FENCING_TOKEN=42"}
		run.StartBy = time.Now().Add(testDeadline)
		if err := c.Begin(run); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, testDeadline, func() bool {
			b, _ := os.ReadFile(marker)
			return len(b) > 0
		}, "the command to write its token")
		if b, _ := os.ReadFile(marker); strings.TrimSpace(string(b)) != "42" {
			t.Fatalf("the command saw token %q, want the term's 42", b)
		}
		stopOK(t, c, context.Background())
	})
}

// TestPreparedInitGoneStartsAnother: the candidate's prepared init was
// killed while it waited; the term starts its child with a new init, and
// Run leaves no init behind when it returns.
func TestPreparedInitGoneStartsAnother(t *testing.T) {
	needMode(t, ContainPidns)
	marker := filepath.Join(t.TempDir(), "ran")
	h, inits := preparedHarness(t, "/bin/sh", "-c", `echo "$ELECTD_FENCING_TOKEN" > `+marker+`; exec sleep 1000`)
	if err := syscall.Kill(inits[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Gone (reaped by its waiter), not only dead: a thread group leader
	// shows as a zombie while its other threads, which hold the control
	// pipe open, are still exiting.
	waitFor(t, "the prepared init reaped", func() bool { return procGone(inits[0]) })
	h.grant(9)
	waitFor(t, "the child started", func() bool { return h.ev.has("child_started") })
	waitFor(t, "the command's token", func() bool {
		b, _ := os.ReadFile(marker)
		return strings.TrimSpace(string(b)) == "9"
	})
	if now := preparedInits(); len(now) != 1 || now[0] == inits[0] {
		t.Fatalf("inits %v while leading, want one new one (the killed one was %d)", now, inits[0])
	}
	h.cancel()
	if err := h.runReturned(t, testDeadline, "Run did not return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if left := preparedInits(); len(left) > 0 {
		t.Fatalf("inits %v left after Run returned", left)
	}
}

// TestRunReleasesPreparedInit: a candidate that stops while it waits ends
// its prepared init before Run returns.
func TestRunReleasesPreparedInit(t *testing.T) {
	needMode(t, ContainPidns)
	h, inits := preparedHarness(t, "sleep", "1000")
	h.cancel()
	if err := h.runReturned(t, testDeadline, "Run did not return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !procGone(inits[0]) {
		t.Fatalf("the prepared init %d still exists after Run returned", inits[0])
	}
}

// preparedHarness is a pidns candidate of command that waits in its
// campaign, and its one prepared init (the test fails if it has not one).
func preparedHarness(t *testing.T, command ...string) (*harness, []int) {
	t.Helper()
	campaigning := make(chan struct{}, 1)
	h := newHarness(t, func(c *Config) {
		c.Command = command
		c.Containment, c.Logger = ContainPidns, testLogger(t)
		c.Elector.(*fakeElector).campaigning = campaigning
	})
	<-campaigning
	inits := preparedInits()
	if len(inits) != 1 {
		t.Fatalf("a waiting candidate has inits %v, want one prepared", inits)
	}
	return h, inits
}
