package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/supervisor"
)

// Exit codes. The child's own code passes through for --on-exit=exit and lock.
const (
	exitOK       = 0
	exitFailure  = 1  // runtime failure
	exitUsage    = 2  // bad usage or configuration
	exitNoLeader = 3  // `electd leader`: the election has no leader
	exitLockBusy = 75 // `electd lock`: not acquired within --wait (EX_TEMPFAIL)
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
		be *lockBusyError
		le *lockLostError
		ge *signalError
		me *commandError
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
	case errors.As(err, &le):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitLockLost
	case errors.As(err, &ge):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitSignal + int(ge.sig)
	case errors.As(err, &me):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return me.code
	case errors.As(err, &ue), errors.As(err, &ce), errors.As(err, &se):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitFailure
	}
}
