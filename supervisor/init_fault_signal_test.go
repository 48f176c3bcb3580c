package supervisor

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestInitDropsFaultSignals: the namespace init "catches and drops every
// signal it gets, all its life" (nsinit's package doc, README: "a signal
// sent to the init itself is dropped"). The signals of faults are not in
// its subscription (ForwardedSignals leaves them out), so the Go runtime's
// own handler takes one sent by kill(2): it crashes the init (exit 2, a
// goroutine dump on the command's stderr), and the kernel then SIGKILLs
// the command with the rest of the namespace. A marker forwarded after
// the signal must still reach the command.
func TestInitDropsFaultSignals(t *testing.T) {
	forModes(t, nsModes, func(t *testing.T, mode Containment) {
		for _, sig := range []syscall.Signal{syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGFPE,
			syscall.SIGILL, syscall.SIGTRAP, syscall.SIGSYS, syscall.SIGSTKFLT} {
			out, errOut := newSyncBuf(), newSyncBuf()
			spec := loopSpec(`trap 'echo WINCH' WINCH; `, mode, out)
			spec.Stderr = errOut
			spec.StopTimeout = testDeadline // the stop signal, not SIGKILL, ends it
			c, err := StartChild(spec, testLogger(t))
			if err != nil {
				t.Fatalf("StartChild: %v", err)
			}
			out.waitFor(t, "up")
			if err := syscall.Kill(c.Pid(), sig); err != nil {
				t.Fatalf("%v to the init: %v", sig, err)
			}
			// Taken by one of the init's threads (no longer pending), and
			// only then the marker: forwarded until seen, then a stop.
			waitUntil(t, testDeadline, func() bool { return !sharedPending(c.Pid(), sig) }, "the init to take %v", sig)
			waitUntil(t, testDeadline, func() bool {
				select {
				case <-c.Done():
					return true
				default:
				}
				_ = c.Signal(syscall.SIGWINCH) // coalesces: resent until seen
				return strings.Contains(out.String(), "WINCH")
			}, "the marker forwarded (or the command gone)")
			got := out.String()
			ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
			st, _ := c.Stop(ctx) // SIGTERM, which the command does not trap
			cancel()
			if !strings.Contains(got, "WINCH") || st.Signal != syscall.SIGTERM {
				dump, _, _ := strings.Cut(errOut.String(), "\n")
				t.Errorf("%v sent to the namespace init ended the command: exit %+v (want death by SIGTERM, the stop signal), output %q, stderr starts %q",
					sig, st, got, dump)
			}
		}
	})
}

// sharedPending reports whether sig is pending for process pid as a whole
// (ShdPnd in /proc/PID/status); false once pid is gone.
func sharedPending(pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if hex, ok := strings.CutPrefix(line, "ShdPnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}
