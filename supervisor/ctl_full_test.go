package supervisor

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopWithFullControlPipe: electd never waits on the namespace init's
// control pipe. With the init stopped (SIGSTOP: it reads nothing) and its
// pipe filled by forwarded signals, a forward is refused at once, and a
// stop does not block on the pipe: it kills the init through its pidfd,
// and with it the tree, and returns.
func TestStopWithFullControlPipe(t *testing.T) {
	forModes(t, nsModes, func(t *testing.T, mode Containment) {
		c, out := runSh(t, `trap '' TERM; echo up; while :; do sleep 1000 & wait; done`, ChildSpec{Containment: mode, StopTimeout: time.Hour})
		out.waitFor(t, "up")
		stopInit(t, c.Pid())
		t.Cleanup(func() { _ = syscall.Kill(c.Pid(), syscall.SIGCONT) })
		var refused error
		for i := 0; i < 1<<20 && refused == nil; i++ {
			refused = c.Signal(syscall.SIGWINCH)
		}
		if refused == nil || !strings.Contains(refused.Error(), "does not read its control pipe") {
			t.Fatalf("forwards to a stopped init: %v; want one refused once its pipe is full", refused)
		}
		stopped := make(chan ExitStatus, 1)
		go func() {
			st, _ := c.Stop(context.Background())
			stopped <- st
		}()
		select {
		case st := <-stopped:
			if !st.Killed && st.Signal != syscall.SIGKILL {
				t.Fatalf("stop: %+v; want the tree killed", st)
			}
		case <-time.After(testDeadline):
			t.Fatalf("Stop blocked on the full control pipe of a stopped init for %s", testDeadline)
		}
	})
}
