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
	// Reason is "deadline", "lease_lost", "key_lost", "closed" or "other".
	Reason string
	// Err is why the term ended (nil when the stop-by deadline came first).
	Err error
	// Status is how the stopped child ended.
	Status ExitStatus
}

func (e *TermEndedError) Error() string {
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
// one-shot mode of `electd lock`), with the same child handling as Run: it
// starts the child and waits for the first of: the child's exit, the term's
// end, the stop-by deadline (ValidUntil − StopTimeout − StopMargin) and the
// end of ctx; it stops the child if it still runs, so that it is gone before
// ValidUntil; and it gives the term up. OnExit is ignored.
//
// When the child exits on its own, afterExit (if not nil) runs while the
// term is still held, before it is given up, and RunOnce returns an
// *ExitError carrying the child's status. Otherwise RunOnce returns a
// *TermEndedError or an *InterruptedError, or the error that kept the child
// from starting.
func (s *Supervisor) RunOnce(ctx context.Context, term *elector.Term, afterExit func(context.Context, ExitStatus)) (err error) {
	if len(s.cfg.Command) == 0 {
		return errors.New("supervisor: RunOnce needs a command")
	}
	s.mu.Lock()
	s.running, s.term = true, term
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running, s.lastErr = false, err
		s.mu.Unlock()
	}()

	child, err := s.startChild(term)
	if err != nil {
		s.log.Error("child did not start", "err", err)
		s.give(ctx, term, "child_start_failed")
		return fmt.Errorf("start %s: %w", s.cfg.Command[0], err)
	}
	stopBy := s.newStopTimer(term)
	defer stopBy.stop()

	var reason string
	for reason == "" {
		select {
		case <-ctx.Done():
			reason = "shutdown"
		case <-term.Done():
			reason = elector.LossReason(term.Err())
			s.log.Warn("leadership lost", "reason", reason, "err", term.Err())
		case <-stopBy.C():
			if stopBy.due() {
				reason = "deadline"
				s.log.Warn("lease deadline near without renewal; stopping before it lapses",
					"valid_until", term.ValidUntil(), "stop_timeout", s.cfg.StopTimeout)
			}
		case <-child.Done():
			reason = "child_exited"
		}
	}

	if reason == "child_exited" {
		st := child.Exit()
		s.childGone(child, st)
		s.log.Info("child exited", "code", st.ExitCode(), "outcome", st.Outcome())
		if afterExit != nil {
			afterExit(ctx, st)
		}
		s.give(ctx, term, reason)
		return &ExitError{Status: st}
	}
	s.stopChild(ctx, child, term)
	st := child.Exit()
	s.give(ctx, term, reason)
	if reason == "shutdown" {
		return &InterruptedError{Err: ctx.Err(), Status: st}
	}
	var cause error
	if reason != "deadline" {
		cause = term.Err()
	}
	return &TermEndedError{Reason: reason, Err: cause, Status: st}
}
