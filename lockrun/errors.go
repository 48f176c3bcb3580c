package lockrun

import (
	"fmt"
	"time"

	"github.com/electd/electd/supervisor"
)

// BusyError: the lock was not acquired within --wait, held by another
// (electd exits 75).
type BusyError struct {
	Name   string
	Wait   time.Duration // --wait: 0 tried once
	Slots  int
	Holder string // empty when unknown
}

func (e *BusyError) Error() string {
	what := "lock " + e.Name
	if e.Slots > 1 {
		what = fmt.Sprintf("all %d slots of %s", e.Slots, e.Name)
	}
	msg := fmt.Sprintf("%s: not acquired %s", what, waitPhrase(e.Wait))
	switch {
	case e.Holder != "" && e.Slots > 1:
		msg += "; first holder " + e.Holder
	case e.Holder != "":
		msg += "; held by " + e.Holder
	}
	return msg
}

// waitPhrase says how long --wait d waited, after "not acquired".
func waitPhrase(d time.Duration) string {
	if d == 0 {
		return "at once (--wait 0)"
	}
	return "within --wait " + d.String()
}

func waitText(d time.Duration) string {
	if d < 0 {
		return "forever"
	}
	return d.String()
}

// LostError: the lock was lost while the command ran; it was stopped
// (electd exits 76).
type LostError struct {
	Name string
	Err  *supervisor.TermEndedError
}

func (e *LostError) Error() string {
	if e.Err.NotStarted {
		return fmt.Sprintf("lock %s lost before the command could start (%s); it did not run", e.Name, e.Err.Reason)
	}
	return fmt.Sprintf("lock %s lost while the command ran (%s); the command was stopped (code %d) before the lease could lapse",
		e.Name, e.Err.Reason, e.Err.Status.ExitCode())
}

func (e *LostError) Unwrap() error { return e.Err }

// StoppedError: ctx ended (a signal) while the lock was waited for or held.
type StoppedError struct {
	While string // what was done about it, e.g. "lock released"
	Err   error  // what ended the step, if anything
}

func (e *StoppedError) Error() string {
	if e.Err == nil {
		return "stopped: " + e.While
	}
	return fmt.Sprintf("stopped: %s: %v", e.While, e.Err)
}

func (e *StoppedError) Unwrap() error { return e.Err }
