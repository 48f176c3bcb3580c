// Package nsinit is the namespace init (containment modes pidns and
// userns): PID 1 of the PID namespace that holds the child's whole tree.
//
// supervisor.StartChild re-executes this binary (/proc/self/exe) with argv[0]
// Arg0 as PID 1 of a new PID namespace; this package's init function
// notices and runs Main instead of the program, so every binary that
// imports supervisor (electd, its tests) can be the init. This package
// imports only the standard library, so that its init function runs among
// the first of the program's: an init that is electd's binary pays for
// electd's dependencies' init functions before it can start the command
// (the probe, from exec to exit: 3.0–3.7 ms median here, against
// 12.0–12.7 ms when the init ran in package supervisor, at a load of 4).
// Its argv[1] is the resolved path of the command and the rest its argv.
// The init is started ahead of the term (a candidate prepares it while it
// waits, see supervisor.Supervisor.PrepareChild), so that a term's start
// costs the command's fork and exec and nothing more. The init:
//
//   - reports "ready" and waits for the go message on the control pipe:
//     the moment after which the command must not be exec'd, on
//     CLOCK_MONOTONIC in nanoseconds (0: none), and the command's whole
//     environment (which holds the term's fencing token); the end of the
//     pipe instead (electd gone, or the prepared init dropped) ends it
//     without starting anything;
//   - reads CLOCK_MONOTONIC just before it starts the command and, if that
//     moment has passed (or the clock cannot be read), does not start it:
//     it reports "late" and exits;
//   - starts the command in a process group of its own (a process of the
//     namespace like any other, not PID 1; the init's own threads take the
//     first pids), with the environment of the go message and the
//     stdin/stdout/stderr it was given, untouched, and every
//     signal at its default action (as PID 1 it would ignore SIGTERM; the
//     child is not PID 1, so its behaviour is that of any process);
//   - on a byte Forward(N) from electd on fd 3 (the control pipe) after the
//     go message, sends signal N to that process group: that is how electd
//     forwards the signals it gets (supervisor.ForwardSignals). The signals
//     the init itself gets are caught and dropped, all its life: a signal
//     sent to an idle init was not meant for a command that did not exist
//     yet, and one sent to the init by kill(2) cannot be told apart from
//     it (the kernel may hand a process's pending signal to any of its
//     threads, at any time: no barrier in the init orders it before or
//     after the go message). Every signal, the fault signals too (the
//     runtime would take those for the init's own crash). Caught, not
//     ignored, so that the command starts with each at its default action;
//   - on a byte N ≤ 64 from electd on the control pipe, sends signal N and
//     then SIGCONT to every process of the namespace (kill(-1)): that is how
//     electd's stop signal reaches the whole tree, setsid'd daemons included.
//     The bytes are applied in the order electd sent them, and a byte that
//     came before the command was forked waits for the fork; electd never
//     waits on the pipe (a full one, of an init that does not read it,
//     turns a stop into a SIGKILL of the init, and drops a forward);
//   - reaps every process of the namespace (they all reparent to it);
//   - when the main process exits, writes its status on fd 4 and exits with
//     its code (128+N for signal N). The kernel then SIGKILLs what is left of
//     the namespace and reaps it before the init's own exit is reported, so
//     once electd has reaped the init the whole tree is gone. When nothing
//     is left by then (the init has no child: see alone), the status line
//     says so ("empty"), after the init has closed its stdio: the tree is
//     gone already, and electd (under pidns, where the tree cannot write
//     into the init's pipes unless it is root on the host: the init is not
//     dumpable) need not wait for the init's own exit;
//   - exits, and so kills the tree, when the control pipe reports electd gone
//     (end of file), as Pdeathsig would; it sets its own Pdeathsig (an exec
//     that raises privilege clears the one of electd's fork) and looks at
//     the pipe once it has the go message, before it starts the command,
//     which it does not start once electd is gone.
//
// The go message is 8 bytes of the start-by moment and 4 bytes of the
// environment's length L (both little-endian), then L bytes: each entry of
// the environment followed by a NUL (see Go).
//
// Status lines on fd 4: "ready", "started", then "exited CODE SIGNAL" or
// "exited CODE SIGNAL empty"; or
// "failed MESSAGE" when the command could not be started, or "late
// MESSAGE" when it was not started because the moment had passed.
package nsinit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
	"unsafe"
)

const (
	// Arg0 is the init's argv[0].
	Arg0 = "electd-init"
	// Arg0Userns is the init in a new user namespace: before anything
	// else it waits for a byte on the control pipe, which electd writes
	// once it has written the namespace's id maps (see writeIDMaps).
	Arg0Userns = "electd-init-userns"
	// SelfExe is this binary, which the init is.
	SelfExe  = "/proc/self/exe"
	initCtl  = 3 // control pipe, read end
	initStat = 4 // status pipe, write end
)

func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case Arg0:
		os.Exit(Main(os.Args[1:]))
	case Arg0Userns:
		if !awaitIDMaps() {
			os.Exit(137) // electd is gone, or could not map the ids
		}
		os.Exit(Main(os.Args[1:]))
	}
}

// Main is the namespace init: args are the resolved path of the command
// and then its argv. With fewer it is a probe that checks it is PID 1 and
// exits.
func Main(args []string) int {
	if len(args) < 2 {
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

	// Every signal the init gets, the fault signals too (which the runtime
	// would otherwise take for the init's own crash), is caught and dropped
	// (see the package doc): electd forwards its signals over the control
	// pipe, after the go message. Done now, while the init is prepared,
	// not on the term's path (a round trip with the runtime's signal
	// thread per signal: about 3 ms here).
	signal.Notify(dropped)
	path, argv := args[0], args[1:]

	// The init dies with electd from here on, before it starts anything.
	// The Pdeathsig of electd's fork is not enough: the kernel clears it
	// at an exec that raises privilege (AT_SECURE: this binary with a file
	// capability, as setcap cap_sys_admin+ep gives a non-root electd), and
	// if electd died between the clone and the child's prctl, Go's check
	// (getppid, 0 in a new PID namespace; a SIGKILL to itself, PID 1
	// there, which the kernel drops) misses it. So the init sets its own;
	// then, once it has the go message, it looks at the control pipe:
	// electd gone (its end closed) means no start; and from then on
	// control watches it.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); e != 0 {
		report("failed %s: set the parent-death signal: %v", path, e)
		return 127
	}
	// Not dumpable: under pidns a process of the tree that is not root on
	// the host may not open the init's pipes through /proc/PID/fd (and
	// write a status line of its own), nor ptrace it, though it runs with
	// the same uid (an electd with a file capability: its init, exec'd
	// with AT_SECURE, is not dumpable anyway while fs.suid_dumpable is 0).
	// Under userns the tree is root in the init's user namespace and may
	// all the same (see supervisor's Child.trustsEmpty). The command, once
	// exec'd, is dumpable as the kernel's rules say.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		report("failed %s: make the init not dumpable: %v", path, e)
		return 127
	}
	report("ready")
	startBy, env, err := readGo()
	if err != nil {
		return 137 // electd is gone, or dropped this init unused
	}
	if electdGone() {
		return 137
	}
	started := make(chan int, 1)
	go control(started)
	if startBy > 0 {
		now, err := monotonic()
		if err != nil {
			report("late: %s not started: read CLOCK_MONOTONIC: %v", path, err)
			return 127
		}
		if now >= startBy {
			report("late by %s: %s not started", now-startBy, path)
			return 127
		}
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
	started <- pid
	report("started")

	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
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
		if !alone() {
			report("exited %d %d", code, sig)
		} else {
			// Nothing of the tree is left: electd need not wait for the
			// init's own exit and reaping to know it. The init's stdio
			// (the tree's output pipes) closes first, so that electd's
			// copiers of the tree's output reach its end without waiting
			// for the init's exit (Stop's drain then delivers the rest).
			for fd := range 3 {
				_ = syscall.Close(fd)
			}
			report("exited %d %d empty", code, sig)
		}
		if sig != 0 {
			return 128 + sig
		}
		return code
	}
}

// alone reaps the zombies left in the namespace and reports whether the
// init is now its only process: wait4 has no child left (ECHILD). Every
// other process of the namespace descends from the init: an orphan is
// reparented to the init, or to a subreaper that is itself in the
// namespace, and a process is never reparented out of it. So with no child
// the tree is gone, and nothing can start in the namespace again (only a
// process of the host that joins it with setns(2), which is not the
// tree's, and which the init's exit still kills). A child that is still
// running, or still exiting, is no answer: false, and the init's exit has
// the kernel kill it. __WALL counts children of every kind.
func alone() bool {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG|syscall.WALL, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			return true
		case err != nil || got == 0:
			return false
		}
	}
}

// Go encodes the go message (see the package doc): the command may be
// exec'd until startBy on CLOCK_MONOTONIC (0: any time), with env as its
// whole environment. An entry of env must not hold a NUL.
func Go(startBy time.Duration, env []string) []byte {
	n := 0
	for _, kv := range env {
		n += len(kv) + 1
	}
	msg := make([]byte, 12, 12+n)
	binary.LittleEndian.PutUint64(msg[0:], uint64(startBy))
	binary.LittleEndian.PutUint32(msg[8:], uint32(n))
	for _, kv := range env {
		msg = append(append(msg, kv...), 0)
	}
	return msg
}

// maxEnv bounds the environment of a go message (the kernel's own limit
// on an exec's arguments and environment is far lower).
const maxEnv = 64 << 20

// readGo reads the go message from the control pipe; an error means
// electd's end closed (or the message was malformed) before it came.
func readGo() (startBy time.Duration, env []string, err error) {
	var head [12]byte
	if err := readFull(head[:]); err != nil {
		return 0, nil, err
	}
	startBy = time.Duration(binary.LittleEndian.Uint64(head[0:]))
	n := binary.LittleEndian.Uint32(head[8:])
	if n > maxEnv {
		return 0, nil, fmt.Errorf("go message: environment of %d bytes", n)
	}
	buf := make([]byte, n)
	if err := readFull(buf); err != nil {
		return 0, nil, err
	}
	env = []string{}
	for len(buf) > 0 {
		kv, rest, ok := bytes.Cut(buf, []byte{0})
		if !ok {
			return 0, nil, errors.New("go message: environment entry without its NUL")
		}
		env, buf = append(env, string(kv)), rest
	}
	return startBy, env, nil
}

// readFull fills buf from the control pipe with raw reads: an *os.File
// for the pipe would close it when collected, and control reads it later.
func readFull(buf []byte) error {
	for len(buf) > 0 {
		n, err := syscall.Read(initCtl, buf)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return err
		case n == 0:
			return io.EOF
		}
		buf = buf[n:]
	}
	return nil
}

// awaitIDMaps waits until electd has written the id maps of the init's user
// namespace: a byte on the control pipe; its end means electd is gone.
func awaitIDMaps() bool {
	return readFull(make([]byte, 1)) == nil
}

// electdGone reports whether electd's end of the control pipe is closed
// (a poll that does not wait): electd is gone.
func electdGone() bool {
	fds := [1]struct {
		fd             int32
		events, revent int16
	}{{fd: initCtl, events: pollIn}}
	var ts syscall.Timespec // zero: do not wait
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		return e != 0 || fds[0].revent&(pollHup|pollErr|pollNval) != 0
	}
}

const (
	pollIn   = 0x1 // POLLIN, POLLERR, POLLHUP, POLLNVAL in <poll.h>
	pollErr  = 0x8
	pollHup  = 0x10
	pollNval = 0x20
)

// dropped is where the init's own signals go: nobody reads it, so the
// runtime drops them (see Main).
var dropped = make(chan os.Signal, 1)

// forwardBit marks a byte of the control pipe as a signal to forward to
// the command's process group, not a stop signal for the namespace.
const forwardBit = 0x80

// Forward is the control pipe's byte that has the init forward sig to the
// command's process group; electd sends it only after the go message.
func Forward(sig syscall.Signal) byte { return forwardBit | byte(sig) }

// control applies electd's bytes on the control pipe in the order they
// were sent, each once the command has been forked (started gives its
// pid; a byte that came before waits for it, so that a stop or a forwarded
// signal sent while the command was being started reaches it): a stop
// signal to the whole namespace, a forwarded one to the command's process
// group. It ends the init, and so the tree, when electd is gone.
func control(started <-chan int) {
	ctl := os.NewFile(initCtl, "control")
	buf := make([]byte, 1)
	pid := 0
	for {
		if _, err := ctl.Read(buf); err != nil {
			// electd is gone (or broke the pipe): the tree goes with it.
			_ = syscall.Kill(-1, syscall.SIGKILL)
			os.Exit(137)
		}
		if pid == 0 {
			pid = <-started // the init exits instead if it starts nothing
		}
		if buf[0]&forwardBit != 0 {
			_ = syscall.Kill(-pid, syscall.Signal(buf[0]&^forwardBit))
			continue
		}
		sig := syscall.Signal(buf[0])
		_ = syscall.Kill(-1, sig)
		if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
			_ = syscall.Kill(-1, syscall.SIGCONT)
		}
	}
}

// monotonic reads CLOCK_MONOTONIC, the clock of the start-by moment
// (electd's clock.Monotonic), with a system call of the standard library's.
func monotonic() (time.Duration, error) {
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, e
	}
	return time.Duration(ts.Nano()), nil
}

const clockMonotonic = 1 // CLOCK_MONOTONIC in <linux/time.h>
