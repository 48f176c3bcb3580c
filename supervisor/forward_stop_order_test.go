package supervisor

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestForwardThenStopInOrder: a signal electd forwards before it stops the
// child must reach the command before the stop signal, as it does under
// pgroup (both are kill(2) calls, in order). Under pidns the init applies a
// stop byte at once (kill(-1) from the control goroutine) but hands a
// forward byte to another goroutine that relays it later; so with both
// queued (the init held stopped: a loaded host), a forwarded SIGTSTP can
// land after the stop signal and its SIGCONT: the command, which traps
// SIGTERM to exit cleanly, is left stopped, and Stop SIGKILLs it at the end
// of the grace. Racy: up to 20 attempts.
func TestForwardThenStopInOrder(t *testing.T) {
	needMode(t, ContainPidns)
	const attempts = 20
	for attempt := 1; attempt <= attempts; attempt++ {
		out := newSyncBuf()
		spec := ChildSpec{
			Path:        "/bin/sh",
			Args:        []string{"-c", `trap 'echo TERM; exit 0' TERM; echo up; while :; do sleep 1000 & wait; done`},
			Stdout:      out,
			Containment: ContainPidns,
			StopTimeout: 2 * time.Second,
		}
		c, err := StartChild(spec, testLogger(t))
		if err != nil {
			t.Fatalf("StartChild: %v", err)
		}
		out.waitFor(t, "up")
		pid := c.Pid()
		stopInit(t, pid)
		if err := c.Signal(syscall.SIGTSTP); err != nil {
			t.Fatalf("Signal(SIGTSTP): %v", err)
		}
		type result struct {
			st  ExitStatus
			err error
		}
		stopped := make(chan result, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
			defer cancel()
			st, err := c.Stop(ctx)
			stopped <- result{st, err}
		}()
		waitUntil(t, testDeadline, func() bool { return queuedIn(pid, 3) >= 2 }, "the forward and the stop byte queued")
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatalf("SIGCONT the init: %v", err)
		}
		r := <-stopped
		if r.st.Killed || !strings.Contains(out.String(), "TERM") {
			t.Fatalf("attempt %d: SIGTSTP forwarded, then Stop (SIGTERM): the command was left stopped and SIGKILLed after the grace: exit %+v, output %q",
				attempt, r.st, out.String())
		}
	}
}
