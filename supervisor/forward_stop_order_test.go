package supervisor

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestForwardThenStopInOrder: a signal electd forwards before it stops the
// child must reach the command before the stop signal, as it does under
// pgroup (both are kill(2) calls, in order), with both queued while the
// init is held stopped (a loaded host). On c191de3 the init applied a stop
// byte at once but handed a forward byte to another goroutine that relayed
// it later: a forwarded SIGTSTP could land after the stop signal and its
// SIGCONT, and the command, which traps SIGTERM to exit cleanly, was left
// stopped until Stop SIGKILLed it at the end of the grace. Up to 20
// attempts.
func TestForwardThenStopInOrder(t *testing.T) {
	needMode(t, ContainPidns)
	const attempts = 20
	for attempt := 1; attempt <= attempts; attempt++ {
		out := newSyncBuf()
		spec := loopSpec(`trap 'echo TERM; exit 0' TERM; `, ContainPidns, out)
		spec.StopTimeout = 2 * time.Second
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
		stopped := stopAsync(c)
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
