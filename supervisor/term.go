package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/backoff"
)

// Why a term ended (besides elector.LossReason's "deadline", "lease_lost",
// "key_lost", "closed", "other").
const (
	endShutdown   = "shutdown"           // ctx ended
	endResigned   = "resigned"           // Resign (POST /resign)
	endDeadline   = "deadline"           // the stop-by moment came without a renewal
	endSuspended  = "suspended"          // the host slept during the term
	endExited     = "child_exited"       // the child's main process exited on its own
	endStartError = "child_start_failed" // the child could not be started
	endRefused    = "timing_refused"     // the term's timing leaves no room for StopTimeout (checkTerm)
)

// ending is how a term ended, for Run and RunOnce to act on.
type ending struct {
	reason string
	// ran: a child was started in this term; exited: the last one's main
	// process exited on its own, with status (else status is how Stop
	// ended it).
	ran, exited bool
	status      ExitStatus
	startErr    error
	// treeErr: processes of the tree survived SIGKILL, and the term ended
	// before they were gone (see awaitTreeGone); afterExit did not run.
	treeErr error
	// refused: the term's timing leaves no room for StopTimeout
	// (checkTerm); no child ran and the term was given up.
	refused error
}

// hold holds one term: the only function that does, for `run` and `lock`
// alike. It refuses a term whose timing leaves no room for StopTimeout
// (checkTerm): gives it up at once, and the ending carries the error. It
// starts the child unless the term has already ended, waits for
// the first reason to end the term, and leaves by one way only:
//
//  1. the child's whole tree is stopped (or, if its main process exited,
//     what is left of the tree is killed) and reaped,
//  2. afterExit runs, if the child exited on its own (lock --once-per
//     records its run here, while the term is still held),
//  3. the term is given up (resigned), and a waiting Resign caller answered.
//
// Under OnExitRestart a child that exits is restarted in place, after the
// old tree is gone and only while the term still holds: never once the term
// has ended or its stop-by moment has passed.
func (s *Supervisor) hold(ctx context.Context, term *elector.Term, onExit OnExit, afterExit func(context.Context, ExitStatus)) ending {
	stop, err := checkTerm(term, s.cfg.StopTimeout, s.cfg.StopTimeoutDefault)
	if err != nil {
		s.log.Error("term refused; no child starts under it", "token", term.Token, "err", err)
		s.give(ctx, term, endRefused, true)
		return ending{reason: endRefused, refused: err}
	}
	if stop != s.cfg.StopTimeout {
		s.log.Info("the term's timing leaves less room than the configured one: its child gets the default stop timeout of that timing",
			"token", term.Token, "timing", term.Timing().String(), "stop_timeout", stop)
	}
	s.mu.Lock()
	s.term = term
	s.mu.Unlock()
	stopBy := newStopTimer(s.cfg.Clock, term, stop)
	defer stopBy.stop()

	var (
		e       ending
		child   *Child
		started time.Time // when child started, on the injected clock
		again   = backoff.New(s.cfg.RestartBackoff, s.cfg.RestartBackoffMax)
		restart clock.Timer // armed while a restart is pending
		killNow bool        // the deadline cannot be trusted: no grace
		// survivor: a child whose tree outlived the term.
		survivor *Child
		ran      []*Child // every child the term started
	)
	defer func() {
		if restart != nil {
			restart.Stop()
		}
	}()
	start := func() {
		if e.reason = s.over(ctx, term, stopBy); e.reason != "" {
			s.log.Warn("term over before the child could start; not starting it", "reason", e.reason)
			return
		}
		c, err := s.startChild(term, stop)
		if errors.Is(err, errStartLate) {
			// The start was slow: the command never ran past the stop-by
			// moment (see ChildSpec.StartBy).
			s.log.Warn("term over while the child was starting; it did not run", "err", err)
			e.reason = endDeadline
			return
		}
		if err != nil {
			s.log.Error("child did not start", "err", err)
			e.reason, e.startErr = endStartError, err
			s.runEnded(0, false, ExitStatus{}, true)
			return
		}
		child, e.ran, e.exited, started = c, true, false, s.cfg.Clock.Now()
		ran = append(ran, c)
		// Starting takes time (under pidns and userns the init is electd re-executed):
		// if the term ended meanwhile, the child stops at once.
		if e.reason = s.over(ctx, term, stopBy); e.reason != "" {
			s.log.Warn("term over while the child was starting; stopping it", "reason", e.reason)
		}
	}
	if len(s.cfg.Command) > 0 {
		start()
	}

	for e.reason == "" {
		var childDone <-chan struct{}
		if child != nil {
			childDone = child.Done()
		}
		var restartC <-chan time.Time
		if restart != nil {
			restartC = restart.C()
		}
		select {
		case <-ctx.Done():
			e.reason = endShutdown
		case <-term.Done():
			e.reason = elector.LossReason(term.Err())
			s.log.Warn("leadership lost", "reason", e.reason, "err", term.Err())
		case <-stopBy.C():
			if stopBy.due() {
				e.reason = endDeadline
				s.log.Warn("lease deadline near without renewal; stopping before it lapses",
					"valid_until", term.ValidUntil(), "stop_timeout", stop)
			}
		case <-s.resignNudge:
			if s.resignAsked() {
				e.reason = endResigned
			}
		case <-childDone:
			e.status, e.treeErr = s.endChild(ctx, child, 0) // what is left of its tree is killed and reaped
			if e.treeErr != nil {
				if e.treeErr = s.awaitTreeGone(term, child, e.treeErr); e.treeErr != nil {
					survivor = child
				}
			}
			e.exited = true
			child = nil
			ran := s.cfg.Clock.Now().Sub(started)
			b := s.runEnded(ran, true, e.status, false)
			if onExit != OnExitRestart {
				var next []any // what follows: under resign, the cool-down
				if onExit == OnExitResign {
					next = []any{"cool_down", b.CoolDown}
				}
				s.logExit(e.status, ran, b, next...)
				e.reason = endExited
				break
			}
			if again.Lasted(ran) {
				again.Reset()
			}
			again.Step()
			restart = s.cfg.Clock.NewTimer(again.Delay())
			s.logExit(e.status, ran, b, "restart_in", again.Delay())
		case <-restartC:
			restart = nil
			start()
		}
		if d, susp := stopBy.suspended(); susp && !killNow {
			killNow = true
			s.log.Error("the host was suspended during the term, so its lease may have lapsed unseen; killing the child's tree now",
				"suspended", d.Round(time.Millisecond))
			if e.reason == "" || e.reason == endDeadline {
				e.reason = endSuspended
			}
		}
	}
	if child != nil {
		e.status, e.treeErr = s.stopChild(ctx, child, term, killNow || e.reason == endSuspended || s.hurried())
		s.runEnded(s.cfg.Clock.Now().Sub(started), false, e.status, false) // a stop is no failure; a long run ends a streak
		if e.treeErr != nil {
			if e.treeErr = s.awaitTreeGone(term, child, e.treeErr); e.treeErr != nil {
				survivor = child
			}
		}
	}
	if e.reason == endExited && afterExit != nil && e.treeErr == nil {
		afterExit(ctx, e.status)
	}
	// With survivors, the term ended by itself: nothing is resigned (a
	// lease still on the store lapses there, later than a resign would
	// hand it on).
	s.give(ctx, term, e.reason, survivor == nil) // and answers the Resign callers
	if survivor != nil {
		s.awaitSurvivors(ctx, survivor)
		return e
	}
	// Every tree of the term is gone. A namespace init that said so before
	// its own exit (see Child.Done) is reaped at once, but after the term
	// was given up: hold waits for it, so that nothing electd started is
	// left when Run or RunOnce returns.
	for _, c := range ran {
		<-c.Reaped()
	}
	return e
}

// awaitTreeGone holds the term while processes of c's tree survive SIGKILL
// (err says how many): they may still run (a process in uninterruptible
// sleep runs again when its I/O returns, only to die; one that is not ours
// to signal runs on), so the term is neither given up nor used for a
// restart until they are gone. The elector keeps renewing it meanwhile, and
// Resign callers wait for the term to be given up. Only the term's own end
// (loss, deadline, close) stops the wait; then the store may hand the term
// on while they live, and the error says so (see awaitSurvivors).
func (s *Supervisor) awaitTreeGone(term *elector.Term, c *Child, err error) error {
	s.log.Error("processes of the child's tree survive SIGKILL; holding the term until they are gone", "err", err)
	if c.awaitGone(term.Done()) {
		s.log.Info("the rest of the child's tree is gone")
		return nil
	}
	s.log.Error("the term ended while processes of the child's tree survive SIGKILL; the store may hand it on with them alive",
		"reason", elector.LossReason(term.Err()))
	return fmt.Errorf("%w; the term ended before they were gone", err)
}

// awaitSurvivors runs after a term that ended with processes of c's tree
// alive: no new term and no new child until they are gone (or ctx ends),
// so that this copy never runs a second tree beside them.
func (s *Supervisor) awaitSurvivors(ctx context.Context, c *Child) {
	s.log.Error("not campaigning again until the old child's tree is gone")
	if c.awaitGone(ctx.Done()) {
		s.log.Info("the rest of the old child's tree is gone")
	}
}

// over says why the term must not run a child any more, or "".
func (s *Supervisor) over(ctx context.Context, term *elector.Term, stopBy *stopTimer) string {
	select {
	case <-ctx.Done():
		return endShutdown
	case <-term.Done():
		return elector.LossReason(term.Err())
	default:
	}
	if _, susp := stopBy.suspended(); susp {
		return endSuspended
	}
	if stopBy.passed() {
		return endDeadline
	}
	return ""
}

// logExit logs an exit of the child on its own after a run of ran: at
// WARN when it failed (a code other than 0, or a signal that was not part
// of a stop, named), with the streak of failures b and what follows (next:
// the cool-down, or the restart's delay); at INFO otherwise.
func (s *Supervisor) logExit(st ExitStatus, ran time.Duration, b ChildBackoff, next ...any) {
	attrs := []any{"code", st.ExitCode(), "outcome", st.Outcome(), "ran", ran.Round(time.Millisecond), "on_exit", s.cfg.OnExit}
	if st.Signal != 0 {
		attrs = append(attrs, "signal", signalName(st.Signal))
	}
	attrs = append(attrs, next...)
	if !st.Failed() {
		s.log.Info("child exited", attrs...)
		return
	}
	s.log.Warn("child exited", append(attrs, "consecutive_failures", b.Failures)...)
}

// stopChild stops the child's tree so that it is gone before the term's
// deadline: the grace period is cut short if it would run past
// ValidUntil − StopMargin, and skipped with killNow.
func (s *Supervisor) stopChild(ctx context.Context, c *Child, term *elector.Term, killNow bool) (ExitStatus, error) {
	left := term.ValidUntil().Add(-StopMargin).Sub(s.cfg.Clock.Now()) // on the injected clock
	if killNow {
		left = 0 // SIGKILL at once
	}
	st, err := s.endChild(ctx, c, left)
	s.log.Info("child stopped", "code", st.ExitCode(), "outcome", st.Outcome(), "killed", st.Killed)
	return st, err
}

// endChild stops c's tree with at most grace for the stop signal (Stop),
// and records the child as gone. grace runs on the boot clock, like the
// child's own stop timeout, so that a suspension of the host does not
// stretch it (and one seen during it ends it: see Child.grace). The error
// says that processes of the tree survived SIGKILL (stuck in
// uninterruptible sleep): nothing more can be done about them, but no run
// is recorded as done.
func (s *Supervisor) endChild(ctx context.Context, c *Child, grace time.Duration) (ExitStatus, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if grace <= 0 {
		cancel()
	} else {
		t := s.cfg.Clock.NewBootTimer(grace)
		defer t.Stop()
		go func() {
			select {
			case <-t.C():
				cancel()
			case <-sctx.Done():
			}
		}()
	}
	st, err := c.Stop(sctx)
	if err != nil {
		s.log.Error("child's tree survived SIGKILL", "err", err)
	}
	s.childGone(c, st)
	return st, err
}
