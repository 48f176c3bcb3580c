package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/backoff"
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
	// of the one under way (see cooldown.go).
	cool      *backoff.Backoff
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
		cool:        backoff.New(cfg.CoolDown, cfg.CoolDownMax),
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

// resignReq is a Resign or ResignTo caller waiting for the term to be
// given up: to names the candidate to hand it to ("" for the next in line).
type resignReq struct {
	reply chan error
	to    string
}
