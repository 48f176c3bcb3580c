package supervisor

import (
	"context"
	"time"
)

// ChildBackoff is the state of the cool-down after failures of the child,
// for /healthz and the metrics.
type ChildBackoff struct {
	// Failures is how many times in a row the child failed: exited with a
	// code other than 0, or was killed by a signal that was not part of a
	// stop, or could not be started. An exit with code 0, or a run that
	// lasted at least CoolDownMax, ends the streak.
	Failures int
	// CoolDown is the wait before campaigning again after this copy hands
	// its term over (on the child's exit, or a resign): --cool-down,
	// doubled for each failure after the first, at most --cool-down-max.
	CoolDown time.Duration
	// Until is when the cool-down under way ends; zero when none is.
	Until time.Time
}

// Backoff reports the cool-down's state.
func (s *Supervisor) Backoff() ChildBackoff {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ChildBackoff{Failures: s.cool.Steps(), CoolDown: s.cool.Delay(), Until: s.coolUntil}
}

// runEnded updates the cool-down's streak with a run of the child that
// lasted ran and, if exited, ended on its own with st (else electd stopped
// it, which is not the child's failure); startErr: it never started. It
// returns the streak.
func (s *Supervisor) runEnded(ran time.Duration, exited bool, st ExitStatus, startErr bool) ChildBackoff {
	s.mu.Lock()
	if s.cool.Lasted(ran) {
		s.cool.Reset()
	}
	switch {
	case startErr || exited && st.Failed():
		s.cool.Step()
	case exited:
		s.cool.Reset() // exit code 0
	}
	s.mu.Unlock()
	b := s.Backoff()
	s.cfg.Events.ChildBackoff(b.Failures, b.CoolDown)
	return b
}

// coolDown waits the cool-down before campaigning again; false: ctx ended.
// The term is given up already: a cool-down never holds one, and never
// delays a stop.
func (s *Supervisor) coolDown(ctx context.Context) bool {
	d := s.Backoff().CoolDown
	t := s.cfg.Clock.NewTimer(d)
	defer t.Stop()
	s.mu.Lock()
	s.coolUntil = s.cfg.Clock.Now().Add(d) // once the timer runs, for tests that wait for it
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.coolUntil = time.Time{}
		s.mu.Unlock()
	}()
	if d > s.cfg.CoolDown {
		s.log.Info("cooling down before campaigning again", "for", d, "consecutive_failures", s.Backoff().Failures)
	}
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
