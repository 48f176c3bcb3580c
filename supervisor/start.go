package supervisor

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/electd/electd/elector"
)

// childSpec is the part of every term's ChildSpec that PrepareChild uses.
func (s *Supervisor) childSpec() ChildSpec {
	return ChildSpec{
		Path: s.cfg.Command[0], Args: s.cfg.Command[1:], Shell: s.cfg.Shell,
		Stdout: s.cfg.Stdout, Stderr: s.cfg.Stderr, Containment: s.cfg.Containment,
	}
}

func (s *Supervisor) startChild(term *elector.Term, stopTimeout time.Duration) (*Child, error) {
	env := append([]string(nil), s.cfg.Env...)
	env = append(env,
		"ELECTD_ELECTION="+s.cfg.Election,
		"ELECTD_ID="+s.cfg.ID,
		"ELECTD_FENCING_TOKEN="+strconv.FormatUint(term.Token, 10),
		"ELECTD_LEADER_SINCE="+term.Leader.Since.UTC().Format(time.RFC3339Nano),
	)
	spec := s.childSpec()
	spec.Env = env
	spec.StopSignal, spec.StopTimeout, spec.Clock = s.cfg.StopSignal, stopTimeout, s.cfg.Clock
	// Nothing execs the command after the term's stop-by moment, and a
	// start still pending at ValidUntil − StopMargin is killed.
	spec.StartBy = StopBy(term.ValidUntil(), stopTimeout)
	spec.KillBy = term.ValidUntil().Add(-StopMargin)
	c, err := s.start(spec)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.child = c
	s.mu.Unlock()
	s.cfg.Events.ChildStarted()
	s.log.Info("child started", "pid", c.Pid(), "token", term.Token)
	return c, nil
}

// start starts spec with the prepared init, if there is one, or else (or
// if that init was gone) with a new one.
func (s *Supervisor) start(spec ChildSpec) (*Child, error) {
	s.mu.Lock()
	c := s.prepared
	s.prepared = nil
	s.mu.Unlock()
	if c != nil {
		err := c.Begin(spec)
		if !errors.Is(err, errInitGone) {
			if err != nil {
				return nil, err
			}
			return c, nil
		}
		s.log.Warn("the prepared namespace init was gone; starting the child with a new one", "err", err)
	}
	return StartChild(spec, s.cfg.Logger)
}

// PrepareChild starts the namespace init of the next term's child (under
// pidns and userns, with a command), unless one is ready: the candidate
// calls it before it campaigns, so that the term's start costs only the
// command's fork and exec. The init runs nothing until the term begins
// (see Child.Begin) and dies with electd. A failure is logged, and the
// term then starts its init itself. Run calls it; a caller of RunOnce may,
// and then calls ReleasePrepared once it is done. Once ctx ends, an init
// not yet ready is killed and PrepareChild returns.
func (s *Supervisor) PrepareChild(ctx context.Context) {
	if len(s.cfg.Command) == 0 || ctx.Err() != nil {
		return
	}
	spec := s.childSpec()
	s.mu.Lock()
	ready := s.prepared != nil
	s.mu.Unlock()
	if ready {
		return
	}
	// Bounded on the real clock: a stuck init must not keep the candidate
	// from campaigning.
	c, err := prepareChild(spec, s.cfg.Logger, time.Now().Add(prepareTimeout), ctx.Done())
	if errors.Is(err, errNoInit) {
		return // pgroup: nothing to prepare
	}
	if errors.Is(err, errPrepareCancelled) {
		s.log.Debug("gave up preparing the child's namespace init", "err", err)
		return
	}
	if err != nil {
		s.log.Warn("could not start the child's namespace init ahead of the term; the term will start one", "err", err)
		return
	}
	s.mu.Lock()
	s.prepared = c
	s.mu.Unlock()
}

// prepareTimeout bounds PrepareChild's wait for the init to be ready.
const prepareTimeout = 10 * time.Second

// ReleasePrepared ends the prepared init, if any, and waits until it is
// reaped.
func (s *Supervisor) ReleasePrepared() {
	s.mu.Lock()
	c := s.prepared
	s.prepared = nil
	s.mu.Unlock()
	if c != nil {
		c.Release()
	}
}

func (s *Supervisor) childGone(c *Child, st ExitStatus) {
	s.mu.Lock()
	was := s.child == c
	if was {
		s.child = nil
	}
	s.mu.Unlock()
	if was {
		s.cfg.Events.ChildExited(st.Outcome())
	}
}
