package nsinit

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// notForwarded are the signals supervisor.ForwardSignals and the init
// leave alone, and why.
// Everything else that Go lets a program catch is forwarded, as tini does:
// SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT, SIGTSTP, SIGXCPU,
// SIGXFSZ, SIGVTALRM, SIGWINCH, SIGIO, SIGPWR and the real-time signals
// 35..64. Forwarding SIGQUIT means the Go runtime no longer dumps electd's
// goroutines on it (an operator expects the supervised program to get it);
// forwarding SIGHUP means electd no longer dies when its terminal hangs up.
var notForwarded = map[syscall.Signal]string{
	syscall.SIGINT:  "electd's own shutdown: stop the child, resign, exit",
	syscall.SIGTERM: "electd's own shutdown: stop the child, resign, exit",
	syscall.SIGCHLD: "about electd's children; used by ReapOrphans",
	syscall.SIGPIPE: "raised by electd's own writes to a closed pipe",
	syscall.SIGURG:  "used by the Go runtime for goroutine preemption",
	syscall.SIGPROF: "used by the Go runtime's CPU profiler; never delivered to Notify",
	syscall.SIGKILL: "cannot be caught",
	syscall.SIGSTOP: "cannot be caught",
	syscall.SIGTTIN: "job control for electd's own terminal access; the child's group gets its own",
	syscall.SIGTTOU: "job control for electd's own terminal access; the child's group gets its own",
	// Faults concern the process they happen in; the Go runtime handles them.
	syscall.SIGILL:    "fault in electd",
	syscall.SIGTRAP:   "fault in electd",
	syscall.SIGABRT:   "fault in electd",
	syscall.SIGBUS:    "fault in electd",
	syscall.SIGFPE:    "fault in electd",
	syscall.SIGSEGV:   "fault in electd",
	syscall.SIGSTKFLT: "fault in electd",
	syscall.SIGSYS:    "fault in electd",
	// 32 and 33 belong to the C library and the Go runtime (thread
	// cancellation, setuid on all threads); 34 is musl's SIGSYNCCALL.
	32: "reserved by libc and the Go runtime",
	33: "reserved by libc and the Go runtime",
	34: "reserved by musl libc",
}

// ForwardedSignals lists the signals that supervisor.ForwardSignals and
// the init forward.
func ForwardedSignals() []os.Signal {
	var sigs []os.Signal
	for s := syscall.Signal(1); s <= 64; s++ {
		if _, skip := notForwarded[s]; !skip {
			sigs = append(sigs, s)
		}
	}
	return sigs
}

// ignoredSink is a channel that nobody reads; see DefaultDispositions.
var ignoredSink = make(chan os.Signal, 1)

// DefaultDispositions makes the next child start with the default action for
// the signals that matter to it, as under systemd. In a forked child Go resets
// to the default only the signals its runtime handles; a signal that electd
// has ignored (SIGHUP under nohup, SIGINT when a shell starts electd in the
// background) would stay ignored in the child, and a --stop-signal=SIGINT
// would then do nothing. So each such signal is handled by a channel that is
// never read: the runtime drops the signal, which keeps electd's own behavior
// (ignored) while its children get the default again.
//
// The kernel's view (SigIgn in /proc/self/status) is used rather than
// signal.Ignored, which misses some states (after Ignore and Reset, or after
// Notify and Stop, SIGHUP and SIGINT go back to ignored without it knowing).
// The job-control signals are left alone: handling SIGTTIN/SIGTTOU instead of
// ignoring them would change what happens when electd uses its terminal from
// the background, and an ignored SIGTSTP or SIGCONT does not hurt the child.
func DefaultDispositions() {
	ignored, err := IgnoredSignals()
	if err != nil {
		ignored = nil
		for s := syscall.Signal(1); s <= 64; s++ {
			if signal.Ignored(s) {
				ignored = append(ignored, s)
			}
		}
	}
	var sigs []os.Signal
	for _, s := range ignored {
		switch {
		case s == syscall.SIGKILL || s == syscall.SIGSTOP || (s >= 32 && s <= 34),
			s == syscall.SIGTSTP || s == syscall.SIGTTIN || s == syscall.SIGTTOU || s == syscall.SIGCONT:
			continue
		}
		sigs = append(sigs, s)
	}
	if len(sigs) > 0 {
		signal.Notify(ignoredSink, sigs...)
	}
}

// IgnoredSignals reads the signals this process ignores from the SigIgn mask
// in /proc/self/status (bit n-1 is signal n).
func IgnoredSignals() ([]syscall.Signal, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(b)) {
		hex, ok := strings.CutPrefix(line, "SigIgn:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("parse SigIgn: %w", err)
		}
		var sigs []syscall.Signal
		for n := 1; n <= 64; n++ {
			if mask&(1<<(n-1)) != 0 {
				sigs = append(sigs, syscall.Signal(n))
			}
		}
		return sigs, nil
	}
	return nil, errors.New("no SigIgn in /proc/self/status")
}
