package main

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/lockrun"
	"github.com/electd/electd/store"
	"github.com/electd/electd/supervisor"
)

// Exit codes. The child's own code passes through for --on-exit=exit and lock.
const (
	exitOK       = 0
	exitFailure  = 1  // runtime failure
	exitUsage    = 2  // bad usage or configuration
	exitNoLeader = 3  // `electd leader`: the election has no leader
	exitLockBusy = 75 // `electd lock`: not acquired within --wait, held by another (EX_TEMPFAIL)
	exitNoStore  = 69 // the store could not be reached (EX_UNAVAILABLE): `lock` within --wait, `leader`
	exitLockLost = 76 // `electd lock`: lost while the command ran; the command was stopped

	exitNotExecutable = 126 // `electd lock`: COMMAND is not executable (as a shell says)
	exitNotFound      = 127 // `electd lock`: COMMAND not found
	exitSignal        = 128 // + N: `electd lock` stopped by signal N (SIGINT 130, SIGTERM 143)
)

// usageError is a command-line mistake (unknown flag, missing argument).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// errNoLeader is returned by `electd leader` after it printed "none".
var errNoLeader = errors.New("no leader")

// exitCode is the one place errors become exit codes; it prints the error.
func exitCode(err error, stderr io.Writer) int {
	var (
		ue *usageError
		ce *elector.ConfigError
		se *elector.SlotsError
		xe *supervisor.ExitError
		be *lockrun.BusyError
		ne *store.UnreachableError
		le *lockrun.LostError
		ge *signalError
		me *commandError
		fe *lockrun.UnconfirmedError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &xe):
		return xe.Code()
	case errors.Is(err, errNoLeader):
		return exitNoLeader
	case errors.As(err, &be):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitLockBusy
	case errors.As(err, &ne):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitNoStore
	case errors.As(err, &le):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitLockLost
	case errors.As(err, &ge):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitSignal + int(ge.sig)
	case errors.As(err, &me):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return me.code
	case errors.As(err, &ue), errors.As(err, &ce), errors.As(err, &se), errors.As(err, &fe):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitFailure
	}
}

// signalError: electd was asked to stop by a signal (exit 128+signal).
type signalError struct {
	sig   syscall.Signal
	while string // what was done about it, e.g. "command stopped, lock released"
}

func (e *signalError) Error() string {
	if e.while == "" {
		return "stopped by " + signalNameOf(e.sig)
	}
	return fmt.Sprintf("stopped by %s: %s", signalNameOf(e.sig), e.while)
}

func signalNameOf(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return "SIG" + name
		}
	}
	return sig.String()
}

// commandError: COMMAND cannot run (exit 127 or 126), found before the
// lock is taken.
type commandError struct {
	code int
	err  error
}

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }
