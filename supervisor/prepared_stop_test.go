package supervisor

import (
	"syscall"
	"testing"
	"time"
)

// TestStopDuringBeginNotLost: a Stop that overlaps Begin once the go
// message is written (Stop is safe for concurrent use; Signal is already
// accepted then) must still stop the command with its stop signal, with
// the go message and the stop byte both queued while the init is held
// stopped (a loaded host). On c191de3 the init applied a stop byte at once,
// with kill(-1): read before the fork, it reached an empty namespace and
// was lost, and the command, which would die of SIGTERM, ran on until Stop
// SIGKILLed it at the end of the grace. Up to 10 attempts.
func TestStopDuringBeginNotLost(t *testing.T) {
	needMode(t, ContainPidns)
	const attempts = 10
	for attempt := 1; attempt <= attempts; attempt++ {
		out := newSyncBuf()
		spec := loopSpec("", ContainPidns, out)
		spec.StopTimeout = 3 * time.Second
		c, begun := beginHeld(t, spec)
		pid := c.Pid()
		waitUntil(t, testDeadline, func() bool { return c.goSent.Load() }, "the go message written")
		queued := queuedIn(pid, 3)
		stopped := stopAsync(c)
		waitUntil(t, testDeadline, func() bool { return queuedIn(pid, 3) > queued }, "the stop byte queued")
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatalf("SIGCONT the init: %v", err)
		}
		if err := <-begun; err != nil {
			t.Fatalf("Begin: %v", err)
		}
		r := <-stopped
		if r.st.Signal != syscall.SIGTERM {
			t.Fatalf("attempt %d: Stop during Begin: the command did not get the stop signal (SIGTERM): exit %+v, output %q", attempt, r.st, out.String())
		}
	}
}
