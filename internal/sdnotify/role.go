package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/hook"
	"github.com/electd/electd/supervisor"
)

// Sink is what a Role passes every event on to (health.Metrics).
type Sink interface {
	supervisor.Events
	elector.Instrument
}

// Role follows the role of one copy of `electd run` and tells systemd:
// READY=1 once the copy has joined the election (its campaign has begun
// and the store has named the leader, or nobody), STATUS= at each change
// of role, STOPPING=1 when electd begins to stop, and WATCHDOG=1 while the
// leadership loop is live if systemd asks for it. It learns the role from
// the events the metrics get: it is the supervisor's Events and the
// candidate's Instrument, passing each on to next, and it reads the
// leader from the same view as /leader.
type Role struct {
	n    *Notifier
	self string
	next Sink
	log  *slog.Logger

	nudge chan struct{} // a value when the state below may have changed

	mu          sync.Mutex
	campaigning bool            // the loop has called Campaign
	leading     bool            // a term is held
	token       uint64          // its token, or the last term's
	failing     map[string]bool // store operations that fail now

	warned bool // a send failed and was logged (Run's own)

	// The --on-change hooks' view of the role (see OnChange).
	changeMu sync.Mutex
	onChange func(hook.Change)
	told     hook.Change // the last change told
	stopped  bool        // Stopped was called: no change follows
}

// NewRole returns a Role of the copy self that notifies n (nil: nothing
// is sent, events still reach next).
func NewRole(n *Notifier, self string, next Sink, log *slog.Logger) *Role {
	return &Role{n: n, self: self, next: next, log: log, nudge: make(chan struct{}, 1), failing: map[string]bool{}}
}

func (r *Role) set(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
	select {
	case r.nudge <- struct{}{}:
	default:
	}
}

// Acquired is supervisor.Events.
func (r *Role) Acquired(token uint64, waited time.Duration) {
	r.next.Acquired(token, waited)
	r.set(func() { r.leading, r.token = true, token })
}

// Lost is supervisor.Events.
func (r *Role) Lost(reason string) {
	r.next.Lost(reason)
	r.set(func() { r.leading = false })
}

// CampaignFailed is supervisor.Events.
func (r *Role) CampaignFailed(err error) { r.next.CampaignFailed(err) }

// ChildStarted is supervisor.Events.
func (r *Role) ChildStarted() { r.next.ChildStarted() }

// ChildExited is supervisor.Events.
func (r *Role) ChildExited(outcome string) { r.next.ChildExited(outcome) }

// ChildBackoff is supervisor.Events.
func (r *Role) ChildBackoff(failures int, coolDown time.Duration) {
	r.next.ChildBackoff(failures, coolDown)
}

// StoreError is elector.Instrument.
func (r *Role) StoreError(op string, err error) {
	r.next.StoreError(op, err)
	r.set(func() { r.failing[op] = true })
}

// StoreAnswered is elector.Instrument.
func (r *Role) StoreAnswered(op string) {
	r.next.StoreAnswered(op)
	r.set(func() { delete(r.failing, op) })
}

// Renewed is elector.Instrument.
func (r *Role) Renewed(took time.Duration) { r.next.Renewed(took) }

// Campaigner returns c, telling r when its campaigns begin.
func (r *Role) Campaigner(c supervisor.Campaigner) supervisor.Campaigner {
	return campaigner{c, r}
}

type campaigner struct {
	supervisor.Campaigner
	r *Role
}

func (c campaigner) Campaign(ctx context.Context) (*elector.Term, error) {
	c.r.set(func() { c.r.campaigning = true })
	return c.Campaigner.Campaign(ctx)
}

// OnChange has f told of each change of the role that STATUS= shows
// (leading, following a leader, waiting), as hook.Change, from Run, and
// of the stop (Stopped); f must not block. Call it before Run.
func (r *Role) OnChange(f func(hook.Change)) { r.onChange = f }

// Stopped tells OnChange's f that electd stops, once the child is stopped
// and the term given up; nothing is told after it.
func (r *Role) Stopped() { r.change(hook.Change{Role: hook.Stopped}) }

// change tells OnChange's f of c, unless it was told c last or electd
// has stopped.
func (r *Role) change(c hook.Change) {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	if r.onChange == nil || r.stopped || c == r.told {
		return
	}
	r.told, r.stopped = c, c.Role == hook.Stopped
	r.onChange(c)
}

// Run notifies systemd, and OnChange's f, until ctx ends, then sends
// STOPPING=1 and returns nil; leaders is the election's leader and its
// changes (health.View's Subscribe), live the loop's liveness (for the
// watchdog). Without a Notifier nor an OnChange it waits for ctx.
func (r *Role) Run(ctx context.Context, leaders <-chan elector.Leader, live func() error) error {
	if r.n == nil && r.onChange == nil {
		<-ctx.Done()
		return nil
	}
	var watchdog <-chan time.Time
	if d := WatchdogInterval(); d > 0 && live != nil && r.n != nil {
		t := time.NewTicker(d / 2)
		defer t.Stop()
		watchdog = t.C
	}
	var (
		leader      elector.Leader
		known       bool // leader is what the store says
		ready, sent bool
		last        string
	)
	for {
		select {
		case <-ctx.Done():
			r.send("STOPPING=1", "STATUS=stopping")
			return nil
		case l, ok := <-leaders:
			if !ok {
				leaders = nil // the view stopped: electd is stopping
				continue
			}
			leader, known = l, true
		case <-r.nudge:
		case <-watchdog:
			if live() == nil {
				r.send("WATCHDOG=1")
			}
			continue
		}
		status, campaigning, role := r.status(leader, known)
		if role.Role != "" {
			r.change(role)
		}
		var lines []string
		if !ready && known && campaigning {
			ready = true
			lines = append(lines, "READY=1")
		}
		if status != "" && (!sent || status != last) {
			sent, last = true, status
			lines = append(lines, "STATUS="+status)
		}
		r.send(lines...)
	}
}

// status is the role as STATUS= says it, or "" for no news, and as a
// hook is told it (an empty Role: no news; joining is none either).
func (r *Role) status(leader elector.Leader, known bool) (status string, campaigning bool, role hook.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.leading && len(r.failing) > 0:
		status = fmt.Sprintf("leading (token %d), store unreachable", r.token)
		role = hook.Change{Role: hook.Leading, LeaderID: r.self, Token: r.token}
	case r.leading:
		status = fmt.Sprintf("leading (token %d)", r.token)
		role = hook.Change{Role: hook.Leading, LeaderID: r.self, Token: r.token}
	case len(r.failing) > 0:
		status = "waiting: store unreachable"
		role = hook.Change{Role: hook.Waiting}
	case !known:
		status = "joining the election"
	case leader.IsZero():
		status = "waiting: no leader"
		role = hook.Change{Role: hook.Waiting}
	case leader.ID != r.self:
		status = "following " + leader.ID
		role = hook.Change{Role: hook.Following, LeaderID: leader.ID, Token: leader.Token}
	case r.token != 0 && leader.Token == r.token:
		// The term has ended here (the stop rule, a lost renewal) before
		// its lease has on the store.
		status = fmt.Sprintf("waiting: the store still names this copy (token %d) until its lease ends", r.token)
		role = hook.Change{Role: hook.Waiting}
	default:
		// A term won, which the loop has yet to report: no news.
	}
	return status, r.campaigning, role
}

func (r *Role) send(lines ...string) {
	if err := r.n.Send(lines...); err != nil && !r.warned {
		r.warned = true
		r.log.Warn("cannot notify systemd (said once)", "err", err)
	}
}
