package supervisor

import (
	"context"
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
		spec := ChildSpec{
			Path:        "/bin/sh",
			Args:        []string{"-c", `echo up; while :; do sleep 1000 & wait; done`},
			Stdout:      out,
			Containment: ContainPidns,
			StopTimeout: 3 * time.Second,
		}
		c, err := PrepareChild(spec, testLogger(t), spec.KillBy)
		if err != nil {
			t.Fatalf("PrepareChild: %v", err)
		}
		pid := c.Pid()
		stopInit(t, pid)
		spec.Env = []string{"ELECTD_FENCING_TOKEN=9"}
		begun := make(chan error, 1)
		go func() { begun <- c.Begin(spec) }()
		waitUntil(t, testDeadline, func() bool { return c.goSent.Load() }, "the go message written")
		queued := queuedIn(pid, 3)
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
