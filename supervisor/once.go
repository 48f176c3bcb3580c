package supervisor

import (
	"context"
	"errors"
	"fmt"

	"github.com/electd/electd/elector"
)

// TermEndedError is returned by RunOnce when the term ended (or its stop-by
// deadline came without a renewal) before the child exited on its own; the
// child was stopped first.
type TermEndedError struct {
	// Reason is "deadline", "suspended", "lease_lost", "key_lost", "closed"
	// or "other".
	Reason string
	// Err is why the term ended (nil when the stop-by deadline came first).
	Err error
	// Status is how the stopped child ended.
	Status ExitStatus
	// NotStarted: the term was over before the child could start, so it
	// never ran (Status is zero).
	NotStarted bool
}

func (e *TermEndedError) Error() string {
	if e.NotStarted {
		msg := fmt.Sprintf("term ended before the child could start (%s); it did not run", e.Reason)
		if e.Err != nil {
			msg += ": " + e.Err.Error()
		}
		return msg
	}
	msg := fmt.Sprintf("term ended while the child ran (%s); child stopped with code %d", e.Reason, e.Status.ExitCode())
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *TermEndedError) Unwrap() error { return e.Err }

// InterruptedError is returned by RunOnce when its context ended while the
// child ran; the child was stopped and the term given up.
type InterruptedError struct {
	Err    error // the context's error
	Status ExitStatus
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted; child stopped with code %d: %v", e.Status.ExitCode(), e.Err)
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// RunOnce runs the command once under term, which the caller has won (the
// one-shot mode of `electd lock`). The term is held by the same function as
// Run's terms (hold): the child starts unless the term is already over; the
// first of the child's exit, the term's end, the stop-by deadline
// (ValidUntil − StopTimeout − StopMargin), a suspension and the end of ctx
// ends it; the child's whole tree is stopped and reaped; then the term is
// given up. OnExit is ignored.
//
// When the child exits on its own, afterExit (if not nil) runs once every
// process of its tree is gone, while the term is still held, before it is
// given up, and RunOnce returns an *ExitError carrying the child's status.
// If processes of the tree survived SIGKILL, afterExit does not run and
// RunOnce returns that error instead.
// Otherwise RunOnce returns a *TermEndedError or an *InterruptedError, or
// the error that kept the child from starting (the refusal of a term whose
// timing leaves no room for StopTimeout among them: see checkTerm).
func (s *Supervisor) RunOnce(ctx context.Context, term *elector.Term, afterExit func(context.Context, ExitStatus)) (err error) {
	if len(s.cfg.Command) == 0 {
		return errors.New("supervisor: RunOnce needs a command")
	}
	s.setRunning()
	defer s.setStopped(&err)

	e := s.hold(ctx, term, OnExitExit, afterExit)
	switch {
	case e.refused != nil:
		return e.refused
	case e.startErr != nil:
		return fmt.Errorf("start %s: %w", s.cfg.Command[0], e.startErr)
	case e.reason == endExited && e.treeErr != nil:
		return fmt.Errorf("the command exited with code %d, but its tree did not die; the run was not recorded: %w",
			e.status.ExitCode(), e.treeErr)
	case e.reason == endExited:
		return &ExitError{Status: e.status}
	case e.reason == endShutdown:
		return &InterruptedError{Err: ctx.Err(), Status: e.status}
	}
	var cause error
	if e.reason != endDeadline && e.reason != endSuspended {
		cause = term.Err()
	}
	return &TermEndedError{Reason: e.reason, Err: cause, Status: e.status, NotStarted: !e.ran}
}
