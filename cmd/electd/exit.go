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
	exitFailure  = 1 // runtime failure
	exitUsage    = 2 // bad usage or configuration
	exitNoLeader = 3 // `electd leader`: the election has no leader
	exitLockBusy = 75
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
		xe *supervisor.ExitError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &xe):
		return xe.Code()
	case errors.Is(err, errNoLeader):
		return exitNoLeader
	case errors.As(err, &ue), errors.As(err, &ce):
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "electd: %v\n", err)
		return exitFailure
	}
}
