package supervisor

import (
	"context"
	"fmt"
	"time"
)

// Run campaigns and leads until ctx ends, then stops the child, resigns and
// returns nil. It returns an *ExitError under OnExitExit when the child
// exits, the refusal of a term whose timing leaves no room for StopTimeout
// (see checkTerm), and other errors when the elector fails for good.
func (s *Supervisor) Run(ctx context.Context) (err error) {
	s.setRunning()
	defer s.setStopped(&err)
	b := s.Backoff()
	s.cfg.Events.ChildBackoff(b.Failures, b.CoolDown)
	defer s.ReleasePrepared()
	for {
		s.PrepareChild(ctx)
		start := s.cfg.Clock.Now()
		term, err := s.cfg.Elector.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.cfg.Events.CampaignFailed(err)
			return fmt.Errorf("campaign: %w", err)
		}
		s.cfg.Events.Acquired(term.Token, s.cfg.Clock.Now().Sub(start))
		s.log.Info("leading", "token", term.Token, "waited", s.cfg.Clock.Now().Sub(start).Round(time.Millisecond),
			"valid_until", term.ValidUntil())
		e := s.hold(ctx, term, s.cfg.OnExit, nil)
		switch e.reason {
		case endShutdown:
			return nil
		case endRefused:
			return e.refused
		case endExited:
			if s.cfg.OnExit == OnExitExit {
				return &ExitError{Status: e.status}
			}
			fallthrough
		case endResigned, endStartError:
			// Handed over on purpose: let the others take it before we
			// queue again, the longer the more often the child failed.
			if !s.coolDown(ctx) {
				return nil
			}
		default:
			// Lost (or stopped short of the deadline): campaign again at once.
		}
	}
}
