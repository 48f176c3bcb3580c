package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/electd/electd/elector"
)

// ErrNotLeader is returned by Resign when this copy does not lead.
var ErrNotLeader = elector.ErrNotLeading

// Supervisor runs the leadership loop: campaign, start the child, watch
// the term, the stop-by deadline and the child, stop the child, resign,
// and again.
type Supervisor struct {
	cfg Config
	log *slog.Logger

	// resignNudge wakes hold when a Resign caller was added to resigners.
	resignNudge chan struct{}

	mu    sync.Mutex
	term  *elector.Term
	child *Child
	// resigners are the Resign callers waiting for the current term to be
	// given up; give answers them, under mu, as it ends the term, so a
	// request belongs to the term it was made in and never ends a later one.
	resigners []resignReq
	running   bool // Run is active
	lastErr   error
	// cool is the cool-down after the child's failures, coolUntil the end
	// of the one under way (see backoff.go).
	cool      backoff
	coolUntil time.Time
	// hurry: skip the stop signal's grace, SIGKILL the tree (Hurry).
	hurry bool
	// prepared is the namespace init of the next term's child, started
	// ahead of the term (PrepareChild), or nil.
	prepared *Child
}

// New validates cfg.
func New(cfg Config) (*Supervisor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Supervisor{
		cfg:         cfg,
		log:         cfg.Logger.WithGroup("supervisor"),
		resignNudge: make(chan struct{}, 1),
		cool:        backoff{first: cfg.CoolDown, max: cfg.CoolDownMax},
	}, nil
}

// Containment is the containment mode in force for the child's tree, and
// why it was chosen (see ResolveContainment).
func (s *Supervisor) Containment() (Containment, string) {
	return s.cfg.Containment, s.cfg.containReason
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
func (s *Supervisor) Resign(ctx context.Context) error { return s.resign(ctx, nil, "") }

// resign asks the loop to give the current term up (only if it is term,
// when term is not nil), handing it to candidate to if not empty.
func (s *Supervisor) resign(ctx context.Context, term *elector.Term, to string) error {
	reply := make(chan error, 1)
	s.mu.Lock()
	if s.term == nil || term != nil && s.term != term {
		s.mu.Unlock()
		return ErrNotLeader
	}
	s.resigners = append(s.resigners, resignReq{reply: reply, to: to})
	s.mu.Unlock()
	select {
	case s.resignNudge <- struct{}{}:
	default: // already nudged
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hurry cuts the stop of the child short: its whole tree gets SIGKILL at
// once, through the same stop as ever (Child.Stop, which reaps it), instead
// of after --stop-timeout; a stop not begun yet skips its grace when it
// comes. It is for a second Ctrl-C while electd stops: Run or RunOnce must
// be ending (their ctx ended), since it holds for every later stop too.
// The term is given up as usual once the tree is gone.
func (s *Supervisor) Hurry() {
	s.mu.Lock()
	s.hurry = true
	c := s.child
	s.mu.Unlock()
	if c != nil {
		c.skipGrace()
	}
}

func (s *Supervisor) hurried() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hurry
}

// resignAsked reports whether a Resign caller waits for the current term.
func (s *Supervisor) resignAsked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.resigners) > 0
}

// setRunning marks the loop live for Live, as Run and RunOnce begin.
func (s *Supervisor) setRunning() {
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
}

// setStopped, deferred by Run and RunOnce, marks the loop stopped with the
// error *err they return, for Live.
func (s *Supervisor) setStopped(err *error) {
	s.mu.Lock()
	s.running, s.lastErr = false, *err
	s.mu.Unlock()
}

// Run campaigns and leads until ctx ends, then stops the child, resigns and
// returns nil. It returns an *ExitError under OnExitExit when the child
// exits, and other errors when the elector fails for good.
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
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timing.RenewInterval+time.Second)
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

// childSpec is the part of every term's ChildSpec that PrepareChild uses.
func (s *Supervisor) childSpec() ChildSpec {
	return ChildSpec{
		Path: s.cfg.Command[0], Args: s.cfg.Command[1:], Shell: s.cfg.Shell,
		Stdout: s.cfg.Stdout, Stderr: s.cfg.Stderr, Containment: s.cfg.Containment,
	}
}

func (s *Supervisor) startChild(term *elector.Term) (*Child, error) {
	env := append([]string(nil), s.cfg.Env...)
	env = append(env,
		"ELECTD_ELECTION="+s.cfg.Election,
		"ELECTD_ID="+s.cfg.ID,
		"ELECTD_FENCING_TOKEN="+strconv.FormatUint(term.Token, 10),
		"ELECTD_LEADER_SINCE="+term.Leader.Since.UTC().Format(time.RFC3339Nano),
	)
	spec := s.childSpec()
	spec.Env = env
	spec.StopSignal, spec.StopTimeout, spec.Clock = s.cfg.StopSignal, s.cfg.StopTimeout, s.cfg.Clock
	// Nothing execs the command after the term's stop-by moment, and a
	// start still pending at ValidUntil − StopMargin is killed.
	spec.StartBy = StopBy(term.ValidUntil(), s.cfg.StopTimeout)
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
	if spec.mode() == ContainPgroup {
		return
	}
	s.mu.Lock()
	ready := s.prepared != nil
	s.mu.Unlock()
	if ready {
		return
	}
	// Bounded on the real clock: a stuck init must not keep the candidate
	// from campaigning.
	c, err := prepareChild(spec, s.cfg.Logger, time.Now().Add(prepareTimeout), ctx.Done())
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
