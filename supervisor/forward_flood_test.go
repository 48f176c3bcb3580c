package supervisor

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// allThreadsStopped reports whether every thread of pid is stopped (or
// pid is gone): a SIGSTOPped process's threads stop one by one.
func allThreadsStopped(pid int) bool {
	states, err := taskStates(pid)
	if err != nil {
		return true
	}
	return !slices.ContainsFunc(states, func(st byte) bool { return st != 'T' })
}

// within polls cond until it holds (true) or d has passed (false).
func within(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// stopInit SIGSTOPs the namespace init pid (a loaded host) and waits until
// all its threads are stopped.
func stopInit(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP the init: %v", err)
	}
	waitUntil(t, testDeadline, func() bool { return allThreadsStopped(pid) }, "the init %d stopped", pid)
}

// loopSpec runs the shell script traps, then "echo up" and a loop that
// waits on sleeps (a command that reacts to its signals at once), under
// mode, with its output in out.
func loopSpec(traps string, mode Containment, out *syncBuf) ChildSpec {
	return ChildSpec{
		Path:        "/bin/sh",
		Args:        []string{"-c", traps + `echo up; while :; do sleep 1000 & wait; done`},
		Stdout:      out,
		Containment: mode,
	}
}

// beginHeld prepares spec's init, holds it stopped (stopInit), and begins
// the term's command (token 9) on it in a goroutine, whose result comes on
// begun; the caller lets the init go on (SIGCONT) when it has queued what
// it means to.
func beginHeld(t *testing.T, spec ChildSpec) (c *Child, begun <-chan error) {
	t.Helper()
	c, err := PrepareChild(spec, testLogger(t), spec.KillBy)
	if err != nil {
		t.Fatalf("PrepareChild: %v", err)
	}
	stopInit(t, c.Pid())
	spec.Env = []string{"ELECTD_FENCING_TOKEN=9"}
	ch := make(chan error, 1)
	go func() { ch <- c.Begin(spec) }()
	return c, ch
}

// stopResult is what Stop returned.
type stopResult struct {
	st  ExitStatus
	err error
}

// stopAsync runs c.Stop, bounded by testDeadline, in a goroutine.
func stopAsync(c *Child) <-chan stopResult {
	ch := make(chan stopResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		defer cancel()
		st, err := c.Stop(ctx)
		ch <- stopResult{st, err}
	}()
	return ch
}

// seenOrDone reports whether out holds s, or c is done (and so nothing
// more will come).
func seenOrDone(c *Child, out *syncBuf, s string) func() bool {
	return func() bool {
		select {
		case <-c.Done():
			return true
		default:
		}
		return strings.Contains(out.String(), s)
	}
}

// floodThenHUP forwards n times sig and then one SIGHUP to c, whose
// namespace init (pid) is held stopped, and lets the init run again
// (SIGCONT): the SIGHUP must still reach the command.
func floodThenHUP(t *testing.T, c *Child, pid int, sig syscall.Signal, n int) {
	t.Helper()
	for range n {
		if err := c.Signal(sig); err != nil {
			t.Fatalf("Signal(%s): %v", signalName(sig), err)
		}
	}
	if err := c.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("Signal(SIGHUP): %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT the init: %v", err)
	}
}

// TestForwardedSignalNotDroppedBeforeFork: Child.Signal accepts a signal
// to forward as soon as the go message is written, and returns nil; the
// signal must reach the command. Here the init is held stopped (a loaded
// host) while the go message, 64 SIGCONTs (harmless) and one SIGHUP are
// queued. From the adversarial review of c191de3, whose init relayed
// forwards from a 64-slot channel drained only after the fork and dropped
// a byte when it was full: the SIGHUP was lost.
func TestForwardedSignalNotDroppedBeforeFork(t *testing.T) {
	forModes(t, nsModes, func(t *testing.T, mode Containment) {
		out := newSyncBuf()
		c, begun := beginHeld(t, loopSpec(`trap 'echo HUP' HUP; `, mode, out))
		pid := c.Pid()
		waitUntil(t, testDeadline, func() bool { return c.goSent.Load() }, "the go message written")
		floodThenHUP(t, c, pid, syscall.SIGCONT, 64)
		if err := <-begun; err != nil {
			t.Fatalf("Begin: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
			defer cancel()
			_, _ = c.Stop(ctx)
		})
		// Trapped (echo HUP) or, if it came before the trap was set, the
		// command's death by SIGHUP: either way it arrived.
		ok := within(testDeadline, seenOrDone(c, out, "HUP"))
		if st := c.Exit(); !ok || (!strings.Contains(out.String(), "HUP") && st.Signal != syscall.SIGHUP) {
			t.Fatalf("Signal(SIGHUP) returned nil after 64 SIGCONT, but the command never got it (waited %s): output %q, exit %+v",
				testDeadline, out.String(), st)
		}
	})
}

// TestForwardFloodAfterStart: the same with the command running, as
// electd's ForwardSignals would do it: while the init is held stopped
// electd forwards a burst of SIGWINCH (a terminal being resized) and then
// one SIGHUP (reload); the SIGHUP must reach the command. On c191de3 the
// init's control goroutine read the bytes faster than its relay killed,
// the 64-slot channel filled, and the SIGHUP was lost in about a third to
// a half of the attempts. Up to 20 attempts.
func TestForwardFloodAfterStart(t *testing.T) {
	needMode(t, ContainPidns)
	const attempts, burst = 20, 5000
	for attempt := 1; attempt <= attempts; attempt++ {
		out := newSyncBuf()
		c, err := StartChild(loopSpec(`trap 'echo HUP' HUP; `, ContainPidns, out), testLogger(t))
		if err != nil {
			t.Fatalf("StartChild: %v", err)
		}
		stop := func() {
			ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
			defer cancel()
			_, _ = c.Stop(ctx)
		}
		out.waitFor(t, "up")
		pid := c.Pid()
		stopInit(t, pid)
		floodThenHUP(t, c, pid, syscall.SIGWINCH, burst)
		// Every byte read by the init (then the channel holds at most 64,
		// which the relay hands on at once), then a bounded wait for the HUP.
		waitUntil(t, testDeadline, func() bool { return queuedIn(pid, 3) == 0 }, "the init to read its control pipe")
		lost := !within(testDeadline/5, seenOrDone(c, out, "HUP"))
		got, st := out.String(), c.Exit()
		stop()
		if lost || !strings.Contains(got, "HUP") {
			t.Fatalf("attempt %d: Signal(SIGHUP) returned nil after %d SIGWINCH, but the command never got it: output %q, exit %+v",
				attempt, burst, got, st)
		}
	}
}
