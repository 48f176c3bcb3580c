package supervisor

import (
	"context"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/supervisor/internal/nsinit"
)

// forwarding runs ForwardSignals until the test ends. Before that it
// catches the signals the test will send itself, so that one arriving
// before ForwardSignals has called signal.Notify cannot kill the test.
func forwarding(t *testing.T, target func() *Child, sigs ...os.Signal) {
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, sigs...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ForwardSignals(ctx, target, testLogger(t))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(testDeadline):
			t.Error("ForwardSignals did not return after its context ended")
		}
		signal.Stop(guard)
	})
}

// sendUntil sends sig to the test process until cond holds; it repeats the
// signal because ForwardSignals may not be listening yet.
func sendUntil(t *testing.T, sig syscall.Signal, cond func() bool, what string) {
	t.Helper()
	end := time.Now().Add(testDeadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not seen after %s", what, testDeadline)
		}
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestForwardSignals: a signal electd gets reaches the command, in every
// containment mode (under pidns and userns through the namespace init's
// control pipe).
func TestForwardSignals(t *testing.T) {
	forModes(t, []Containment{ContainPgroup, ContainPidns, ContainUserns}, func(t *testing.T, mode Containment) {
		c, out := runSh(t, `trap 'echo got-usr1' USR1; echo ready; while :; do sleep 1000 & wait; done`, ChildSpec{Containment: mode})
		out.waitFor(t, "ready")
		forwarding(t, func() *Child { return c }, syscall.SIGUSR1)
		sendUntil(t, syscall.SIGUSR1, func() bool {
			select {
			case <-c.Done():
				t.Fatalf("child died of the signal instead of trapping it: %+v", c.Exit())
			default:
			}
			return strings.Contains(out.String(), "got-usr1")
		}, "SIGUSR1 forwarded to the child")
	})
}

func TestForwardSignalsWithoutChild(t *testing.T) {
	asked := make(chan struct{}, 1)
	forwarding(t, func() *Child {
		select {
		case asked <- struct{}{}:
		default:
		}
		return nil
	}, syscall.SIGUSR2)
	sendUntil(t, syscall.SIGUSR2, func() bool {
		select {
		case <-asked:
			return true
		default:
			return false
		}
	}, "SIGUSR2 handled with no child")
}

func TestForwardedSignalSet(t *testing.T) {
	got := nsinit.ForwardedSignals()
	for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
		syscall.SIGWINCH, syscall.SIGCONT, syscall.SIGTSTP, syscall.SIGALRM, 35, 64} {
		if !slices.Contains(got, os.Signal(s)) {
			t.Errorf("%v (%d) is not forwarded", s, int(s))
		}
	}
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD, syscall.SIGPIPE,
		syscall.SIGURG, syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGSEGV, syscall.SIGPROF, 32, 33} {
		if slices.Contains(got, os.Signal(s)) {
			t.Errorf("%v (%d) is forwarded, but electd or the runtime uses it", s, int(s))
		}
	}
}

// TestChildSignalDefaults: a signal that electd ignores (SIGHUP under nohup,
// SIGINT for a background job) must not stay ignored in the child, or a stop
// signal could do nothing. Ignore followed by Reset leaves SIGHUP ignored
// behind the back of signal.Ignored, the harder case. (SIGINT would do as
// well, but the test binary should stay interruptible: afterwards electd's
// sink keeps these signals dropped.)
func TestChildSignalDefaults(t *testing.T) {
	signal.Ignore(syscall.SIGHUP, syscall.SIGUSR2)
	signal.Reset(syscall.SIGHUP)
	t.Cleanup(func() { signal.Reset(syscall.SIGUSR2) })
	ign, err := nsinit.IgnoredSignals()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGUSR2} {
		if !slices.Contains(ign, s) {
			t.Fatalf("%v is not ignored (%v); the test proves nothing", s, ign)
		}
	}
	if sigIgn, mask := childIgnores(t, ChildSpec{}); mask != 0 {
		t.Errorf("child's ignored signals: %s (mask %#x beyond the runtime's and job control's), want none", sigIgn, mask)
	}
}

// childIgnores starts spec's child as `grep ^SigIgn: /proc/self/status`
// (spec gives the rest: its containment) and returns the SigIgn value it
// printed, and the mask of the signals it ignored beyond those that electd
// leaves alone, which may stay ignored if electd's own parent ignored them:
// the runtime's signals 32-34 and job control.
func childIgnores(t *testing.T, spec ChildSpec) (sigIgn string, beyond uint64) {
	t.Helper()
	out := newSyncBuf()
	spec.Path, spec.Args, spec.Stdout = "grep", []string{"^SigIgn:", "/proc/self/status"}, out
	c := runChild(t, spec)
	waitDone(t, c)
	stopOK(t, c, context.Background())
	got := strings.Fields(out.String())
	if len(got) != 2 || got[0] != "SigIgn:" {
		t.Fatalf("child's SigIgn line: %q", got)
	}
	mask, err := strconv.ParseUint(got[1], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []syscall.Signal{32, 33, 34, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGCONT} {
		mask &^= 1 << (uint(s) - 1)
	}
	return got[1], mask
}
