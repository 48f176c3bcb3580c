package supervisor

import (
	"context"
	"strings"
	"syscall"
	"testing"
)

// TestPreparedInitSignalNotForwarded: a signal sent to a prepared init while
// it waits for the go message was not meant for the command, which did not
// exist yet; it must never reach the command the go message starts. The
// init is held stopped (a loaded host) while SIGTERM is sent to it and the
// term's go message is queued in its control pipe; then it goes on. Once
// the command runs, SIGWINCH is forwarded as a marker (Child.Signal, as
// ForwardSignals does), and SIGTERM is sent to the init again: a forwarded
// signal reaches the command, and neither SIGTERM does (the init forwards
// only what electd sends on its control pipe). When the init caught the
// idle signal and drained its channel after the go message, the runtime
// could hand the signal over only after the drain, and the init then
// forwarded it to the command: about one attempt in two here; with a
// barrier after the go message (signal.Stop of a second subscription) the
// kernel could still hand a pending signal to another of the init's
// threads after it.
func TestPreparedInitSignalNotForwarded(t *testing.T) {
	needMode(t, ContainPidns)
	const attempts = 20
	for attempt := 1; attempt <= attempts; attempt++ {
		out := newSyncBuf()
		spec := loopSpec(`trap 'echo TERM' TERM; trap 'echo WINCH' WINCH; `, ContainPidns, out)
		c, err := PrepareChild(spec, testLogger(t), spec.KillBy)
		if err != nil {
			t.Fatalf("PrepareChild: %v", err)
		}
		pid := c.Pid()
		stopInit(t, pid)
		// Sent to the idle init: for nobody.
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM the prepared init: %v", err)
		}
		spec.Env = []string{"ELECTD_FENCING_TOKEN=9"}
		begun := make(chan error, 1)
		go func() { begun <- c.Begin(spec) }()
		waitUntil(t, testDeadline, func() bool { return queuedIn(pid, 3) > 0 }, "the go message queued")
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatalf("SIGCONT the prepared init: %v", err)
		}
		if err := <-begun; err != nil {
			t.Fatalf("Begin: %v", err)
		}
		waitUntil(t, testDeadline, seenOrDone(c, out, "up"), "the command up (or gone)")
		_ = syscall.Kill(pid, syscall.SIGTERM) // to the running init: for nobody either
		_ = c.Signal(syscall.SIGWINCH)         // the init may be gone with the command
		waitUntil(t, testDeadline, seenOrDone(c, out, "WINCH"), "the marker forwarded (or the command gone)")
		got, st := out.String(), c.Exit()
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		_, _ = c.Stop(ctx)
		cancel()
		if strings.Contains(got, "TERM") || st.Signal == syscall.SIGTERM {
			t.Fatalf("attempt %d: a SIGTERM sent to the namespace init reached the command (output %q, exit %+v)", attempt, got, st)
		}
		if !strings.Contains(got, "WINCH") {
			t.Fatalf("attempt %d: the command ended before the marker: output %q, exit %+v", attempt, got, st)
		}
	}
}

// TestPreparedInitCommandSignalDefaults: the signals a prepared init
// ignores while it waits are not ignored in the command it starts.
func TestPreparedInitCommandSignalDefaults(t *testing.T) {
	needMode(t, ContainPidns)
	if sigIgn, mask := childIgnores(t, ChildSpec{Containment: ContainPidns}); mask != 0 {
		t.Fatalf("the command starts with signals ignored: SigIgn %s", sigIgn)
	}
}
