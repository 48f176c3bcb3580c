package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/electd/electd/clock"
)

// The namespace init (containment modes pidns and userns).
//
// StartChild re-executes this binary (/proc/self/exe) with argv[0]
// initArg0 as PID 1 of a new PID namespace; the package's init function
// below notices and runs initMain instead of the program, so every binary
// that imports supervisor (electd, its tests) can be the init. Its argv[1]
// is the moment after which the command must not be exec'd, on
// CLOCK_MONOTONIC in nanoseconds (0: none). The init:
//
//   - reads CLOCK_MONOTONIC just before it starts the command and, if that
//     moment has passed, does not start it: it reports "late" and exits;
//   - starts the command in a process group of its own (a process of the
//     namespace like any other, not PID 1; the init's own threads take the
//     first pids), with the
//     environment and stdin/stdout/stderr it was given, untouched, and every
//     signal at its default action (as PID 1 it would ignore SIGTERM; the
//     child is not PID 1, so its behaviour is that of any process);
//   - forwards every signal it gets to that process group (electd signals
//     the init's own group, which holds only the init);
//   - on a byte N from electd on fd 3 (the control pipe), sends signal N and
//     then SIGCONT to every process of the namespace (kill(-1)): that is how
//     electd's stop signal reaches the whole tree, setsid'd daemons included;
//   - reaps every process of the namespace (they all reparent to it);
//   - when the main process exits, writes its status on fd 4 and exits with
//     its code (128+N for signal N). The kernel then SIGKILLs what is left of
//     the namespace and reaps it before the init's own exit is reported, so
//     once electd has reaped the init the whole tree is gone;
//   - exits, and so kills the tree, when the control pipe reports electd gone
//     (end of file), as Pdeathsig would.
//
// Status lines on fd 4: "started", then "exited CODE SIGNAL"; or
// "failed MESSAGE" when the command could not be started, or "late
// MESSAGE" when it was not started because the moment had passed.

const (
	initArg0 = "electd-init"
	// initArg0Userns is the init in a new user namespace: before anything
	// else it waits for a byte on the control pipe, which electd writes
	// once it has written the namespace's id maps (see writeIDMaps).
	initArg0Userns = "electd-init-userns"
	selfExe        = "/proc/self/exe"
	initCtl        = 3 // control pipe, read end
	initStat       = 4 // status pipe, write end
)

func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case initArg0:
		os.Exit(initMain(os.Args[1:]))
	case initArg0Userns:
		if !awaitIDMaps() {
			os.Exit(137) // electd is gone, or could not map the ids
		}
		os.Exit(initMain(os.Args[1:]))
	}
}

// initMain is the namespace init: args are the start-by moment (see
// above), the resolved path of the command and then its argv. With no args
// it is a probe that checks it is PID 1 and exits.
func initMain(args []string) int {
	if len(args) < 3 {
		if os.Getpid() != 1 {
			return 1
		}
		return 0
	}
	// The pipes must not leak into the tree: a worker holding the status
	// pipe would keep electd from seeing its end.
	syscall.CloseOnExec(initCtl)
	syscall.CloseOnExec(initStat)
	status := os.NewFile(initStat, "status")
	report := func(format string, args ...any) {
		_, _ = fmt.Fprintf(status, format+"\n", args...)
	}

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, append(forwardedSignals(), syscall.SIGTERM, syscall.SIGINT)...)
	defaultDispositions()

	env := os.Environ()
	startBy, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		report("failed start-by moment %q: %v", args[0], err)
		return 127
	}
	path, argv := args[1], args[2:]
	if now := clock.Monotonic(); startBy > 0 && now >= time.Duration(startBy) {
		report("late by %s: %s not started", now-time.Duration(startBy), path)
		return 127
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		report("failed %s: %v", path, err)
		return 127
	}
	report("started")

	go func() {
		for s := range sigs {
			if sig, ok := s.(syscall.Signal); ok {
				_ = syscall.Kill(-pid, sig)
			}
		}
	}()
	go control()

	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			report("exited -1 0")
			return 1
		}
		if got != pid {
			continue // an orphan of the tree: reaped
		}
		code, sig := ws.ExitStatus(), 0
		if ws.Signaled() {
			code, sig = -1, int(ws.Signal())
		}
		report("exited %d %d", code, sig)
		if sig != 0 {
			return 128 + sig
		}
		return code
	}
}

// awaitIDMaps waits until electd has written the id maps of the init's user
// namespace: a byte on the control pipe; its end means electd is gone.
func awaitIDMaps() bool {
	// A raw read: an *os.File for the pipe would close it when collected,
	// and control reads it later.
	buf := make([]byte, 1)
	for {
		n, err := syscall.Read(initCtl, buf)
		switch {
		case n == 1:
			return true
		case errors.Is(err, syscall.EINTR):
			continue
		default:
			return false
		}
	}
}

// control applies the stop signals electd sends on the control pipe to the
// whole namespace, and ends the init when electd is gone.
func control() {
	ctl := os.NewFile(initCtl, "control")
	buf := make([]byte, 1)
	for {
		if _, err := ctl.Read(buf); err != nil {
			// electd is gone (or broke the pipe): the tree goes with it.
			_ = syscall.Kill(-1, syscall.SIGKILL)
			os.Exit(137)
		}
		sig := syscall.Signal(buf[0])
		_ = syscall.Kill(-1, sig)
		if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
			_ = syscall.Kill(-1, syscall.SIGCONT)
		}
	}
}

// initStatus is what the init reported on its status pipe.
type initStatus struct {
	started bool
	failed  string // why the command did not start
	late    bool   // not started: the start-by moment had passed
	exited  bool
	code    int
	signal  syscall.Signal
}

// readInitStatus reads status lines until the first one that settles the
// start (started or failed), or, with untilEnd, until the pipe's end.
func readInitStatus(r *bufio.Reader, st *initStatus, untilEnd bool) error {
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
			switch word {
			case "started":
				st.started = true
			case "failed":
				st.failed = rest
			case "late":
				st.failed, st.late = rest, true
			case "exited":
				f := strings.Fields(rest)
				if len(f) == 2 {
					code, err1 := strconv.Atoi(f[0])
					sig, err2 := strconv.Atoi(f[1])
					if err1 == nil && err2 == nil {
						st.exited, st.code, st.signal = true, code, syscall.Signal(sig)
					}
				}
			}
			if !untilEnd && (st.started || st.failed != "") {
				return nil
			}
		}
		if err != nil {
			return err
		}
	}
}
