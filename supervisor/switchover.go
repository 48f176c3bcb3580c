package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/electd/electd/elector"
)

// ResignTo is Resign that hands the term to candidate id: the loop stops
// the child's tree as for Resign, and only then does the store make id the
// next leader (elector.Term.ResignTo). It is refused while the term still
// holds, with ErrNotLeader, elector.ErrSwitchoverToSelf, elector.ErrNoSwitchover
// (the backend cannot), a *elector.NotQueuedError, or a store error. If id
// leaves the queue while the child stops, the term goes to the next in
// line and the *elector.NotQueuedError is returned after all.
func (s *Supervisor) ResignTo(ctx context.Context, id string) error {
	s.mu.Lock()
	term := s.term
	s.mu.Unlock()
	switch {
	case term == nil:
		return ErrNotLeader
	case id == term.Leader.ID:
		return fmt.Errorf("switchover to %q: %w", id, elector.ErrSwitchoverToSelf)
	}
	if err := term.Queued(ctx, id); err != nil {
		return fmt.Errorf("switchover to %q: %w", id, err)
	}
	s.log.Info("switchover requested", "to", id, "token", term.Token)
	return s.resign(ctx, term, id)
}

// switchTarget is the candidate the first ResignTo caller among reqs
// named, or "" (a plain resignation).
func switchTarget(reqs []resignReq) string {
	for _, r := range reqs {
		if r.to != "" {
			return r.to
		}
	}
	return ""
}

// answer is what a Resign or ResignTo caller r hears once the term was
// given up: resigned whether the loop resigned it (it does not when a
// process of the child's tree survived its stop: the lease then lapses on
// the store), to the candidate it was handed to ("": the next in line),
// err the resignation's result.
func answer(r resignReq, resigned bool, to string, err error) error {
	switch {
	case r.to == "":
		return err
	case !resigned:
		return fmt.Errorf("switchover to %q: not handed over: a process of the child's tree outlived its stop, so the term lapses on the store", r.to)
	case r.to != to:
		return fmt.Errorf("switchover to %q: another request handed the term to %q first", r.to, to)
	}
	return err
}

// giveUp resigns term, to candidate to if not "" (see give).
func (s *Supervisor) giveUp(ctx context.Context, term *elector.Term, to string) error {
	if to == "" {
		err := term.Resign(ctx)
		if err != nil {
			s.log.Warn("resign failed; the lease will expire on the store", "err", err)
		}
		return err
	}
	err := term.ResignTo(ctx, to)
	if err != nil {
		s.log.Warn("switchover did not hand the term to the named candidate; it went to the next in line, or expires on the store", "to", to, "err", err)
		return fmt.Errorf("switchover to %q: %w", to, err)
	}
	s.log.Info("term handed over", "to", to, "token", term.Token)
	return nil
}

// give ends the term: resigns if resign (handing over at once when the
// store is reachable; a failure is logged, and the lease then expires on
// the store), records why, and answers every Resign caller of the term.
func (s *Supervisor) give(ctx context.Context, term *elector.Term, reason string, resign bool) {
	s.mu.Lock()
	s.term = nil
	resigners := s.resigners
	s.resigners = nil
	s.mu.Unlock()
	ended := term.Err() != nil
	to := switchTarget(resigners)
	var err error
	if resign {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), term.Timing().RenewInterval+time.Second)
		defer cancel()
		err = s.giveUp(rctx, term, to)
	}
	if ended {
		// The term ended by itself (expiry, loss, close): that is the reason.
		reason = elector.LossReason(term.Err())
	}
	s.cfg.Events.Lost(reason)
	s.log.Info("leadership given up", "reason", reason, "token", term.Token)
	for _, r := range resigners {
		r.reply <- answer(r, resign, to, err)
	}
}
