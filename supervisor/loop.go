package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// ErrNotLeader is returned by Resign when this copy does not lead.
var ErrNotLeader = errors.New("not the leader")

// Supervisor runs the leadership loop: campaign, start the child, watch
// the term, the stop-by deadline and the child, stop the child, resign,
// and again.
type Supervisor struct {
	cfg Config
	log *slog.Logger

	resignReq chan chan error

	mu      sync.Mutex
	term    *elector.Term
	child   *Child
	running bool // Run is active
	lastErr error
}

// New validates cfg.
func New(cfg Config) (*Supervisor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Supervisor{
		cfg:       cfg,
		log:       cfg.Logger.WithGroup("supervisor"),
		resignReq: make(chan chan error),
	}, nil
}

// Leading reports whether this copy holds a term now.
func (s *Supervisor) Leading() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.term != nil
}

// Ready reports whether traffic should come here: leading, and with a
// command, its child running.
func (s *Supervisor) Ready() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.term == nil:
		return false, "not the leader"
	case len(s.cfg.Command) > 0 && s.child == nil:
		return false, "leader, but the child is not running"
	default:
		return true, "leader"
	}
}

// Live reports whether the loop is running.
func (s *Supervisor) Live() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		if s.lastErr != nil {
			return fmt.Errorf("leadership loop stopped: %w", s.lastErr)
		}
		return errors.New("leadership loop not running")
	}
	return nil
}

// LeaseRemaining is the time left until the current term's ValidUntil, in
// seconds, or 0 when not leading.
func (s *Supervisor) LeaseRemaining() float64 {
	s.mu.Lock()
	t := s.term
	s.mu.Unlock()
	if t == nil {
		return 0
	}
	return max(0, t.Remaining(s.cfg.Clock.Now()).Seconds())
}

// Child returns the running child, or nil; for signal forwarding.
func (s *Supervisor) Child() *Child {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.child
}

// Resign asks the loop to stop the child and hand leadership over now. It
// returns once the term has been given up, or ErrNotLeader.
func (s *Supervisor) Resign(ctx context.Context) error {
	if !s.Leading() {
		return ErrNotLeader
	}
	reply := make(chan error, 1)
	select {
	case s.resignReq <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run campaigns and leads until ctx ends, then stops the child, resigns and
// returns nil. It returns an *ExitError under OnExitExit when the child
// exits, and other errors when the elector fails for good.
func (s *Supervisor) Run(ctx context.Context) (err error) {
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running, s.lastErr = false, err
		s.mu.Unlock()
	}()
	for {
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
		out, err := s.lead(ctx, term)
		if err != nil {
			return err
		}
		switch out {
		case outShutdown:
			return nil
		case outRejoin:
			if err := s.sleep(ctx, s.cfg.CoolDown); err != nil {
				return nil
			}
		case outRecampaign:
		}
	}
}

type outcome int

const (
	outShutdown   outcome = iota // ctx ended
	outRejoin                    // resigned; rejoin after the cool-down
	outRecampaign                // lost; campaign again at once
)

// lead holds one term: it starts the child and waits for the first reason
// to stop, then stops the child and gives the term up.
func (s *Supervisor) lead(ctx context.Context, term *elector.Term) (outcome, error) {
	s.mu.Lock()
	s.term = term
	s.mu.Unlock()

	var (
		child   *Child
		err     error
		backoff = s.cfg.RestartBackoff
		restart clock.Timer // armed while a restart is pending
		reply   chan error  // a /resign caller waiting
		reason  string
		result  = outRecampaign
		exitErr error
	)
	if len(s.cfg.Command) > 0 {
		if child, err = s.startChild(term); err != nil {
			s.log.Error("child did not start", "err", err)
			s.give(ctx, term, "child_start_failed")
			return outRejoin, nil
		}
	}
	stopBy := s.newStopTimer(term)
	defer stopBy.stop()
	defer func() {
		if restart != nil {
			restart.Stop()
		}
	}()

loop:
	for {
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
			reason, result = "shutdown", outShutdown
			break loop
		case <-term.Done():
			reason = elector.LossReason(term.Err())
			s.log.Warn("leadership lost", "reason", reason, "err", term.Err())
			break loop
		case <-stopBy.C():
			if !stopBy.due() {
				continue
			}
			reason = "deadline"
			s.log.Warn("lease deadline near without renewal; stopping before it lapses",
				"valid_until", term.ValidUntil(), "stop_timeout", s.cfg.StopTimeout)
			break loop
		case reply = <-s.resignReq:
			reason, result = "resigned", outRejoin
			break loop
		case <-childDone:
			st := child.Exit()
			s.childGone(child, st)
			s.log.Info("child exited", "code", st.ExitCode(), "outcome", st.Outcome(), "on_exit", s.cfg.OnExit)
			switch s.cfg.OnExit {
			case OnExitRestart:
				child = nil
				restart = s.cfg.Clock.NewTimer(backoff)
				s.log.Info("restarting child", "in", backoff)
				backoff = min(2*backoff, s.cfg.RestartBackoffMax)
				continue
			case OnExitExit:
				reason, result, exitErr = "child_exited", outShutdown, &ExitError{Status: st}
			default:
				reason, result = "child_exited", outRejoin
			}
			child = nil
			break loop
		case <-restartC:
			restart = nil
			if child, err = s.startChild(term); err != nil {
				s.log.Error("child did not restart", "err", err)
				reason, result = "child_start_failed", outRejoin
				break loop
			}
		}
	}
	if child != nil {
		s.stopChild(ctx, child, term)
	}
	rerr := s.give(ctx, term, reason)
	if reply != nil {
		reply <- rerr
	}
	return result, exitErr
}

// give ends the term: resigns (handing over at once when the store is
// reachable) and records why.
func (s *Supervisor) give(ctx context.Context, term *elector.Term, reason string) error {
	s.mu.Lock()
	s.term = nil
	s.mu.Unlock()
	ended := term.Err() != nil
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timing.RenewInterval+time.Second)
	defer cancel()
	err := term.Resign(rctx)
	if err != nil {
		s.log.Warn("resign failed; the lease will expire on the store", "err", err)
	}
	if ended {
		// The term ended by itself (expiry, loss, close): that is the reason.
		reason = elector.LossReason(term.Err())
	}
	s.cfg.Events.Lost(reason)
	s.log.Info("leadership given up", "reason", reason, "token", term.Token)
	return err
}

func (s *Supervisor) startChild(term *elector.Term) (*Child, error) {
	env := append([]string(nil), s.cfg.Env...)
	env = append(env,
		"ELECTD_ELECTION="+s.cfg.Election,
		"ELECTD_ID="+s.cfg.ID,
		"ELECTD_FENCING_TOKEN="+strconv.FormatUint(term.Token, 10),
		"ELECTD_LEADER_SINCE="+term.Leader.Since.UTC().Format(time.RFC3339Nano),
	)
	spec := ChildSpec{
		Path: s.cfg.Command[0], Args: s.cfg.Command[1:], Shell: s.cfg.Shell, Env: env,
		Stdout: s.cfg.Stdout, Stderr: s.cfg.Stderr,
		StopSignal: s.cfg.StopSignal, StopTimeout: s.cfg.StopTimeout,
	}
	c, err := StartChild(spec, s.cfg.Logger)
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

// stopChild stops the child so that it is gone before the term's deadline:
// the grace period is cut short if it would run past ValidUntil − margin.
func (s *Supervisor) stopChild(ctx context.Context, c *Child, term *elector.Term) {
	deadline := term.ValidUntil().Add(-StopMargin)
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	st, err := c.Stop(sctx)
	if err != nil {
		s.log.Error("child group survived SIGKILL", "err", err)
	}
	s.childGone(c, st)
	s.log.Info("child stopped", "code", st.ExitCode(), "outcome", st.Outcome(), "killed", st.Killed)
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

func (s *Supervisor) sleep(ctx context.Context, d time.Duration) error {
	t := s.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
