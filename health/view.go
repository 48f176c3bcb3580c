package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/electd/electd/elector"
)

// Observer reports leader changes. elector.Elector satisfies it.
type Observer interface {
	// Observe sends the current leader and then every change (a zero
	// elector.Leader meaning "none") until ctx ends, then closes the channel.
	Observe(ctx context.Context) <-chan elector.Leader
}

var _ Observer = elector.Elector(nil)

// ChangeCounter is told about every leader change a View observes.
// *Metrics implements it (leader_changes_total). LeaderChanged is called
// with the View's lock held: it must be quick and must not call the View.
type ChangeCounter interface {
	LeaderChanged()
}

var _ ChangeCounter = (*Metrics)(nil)

// errObserverClosed is returned by Run when the observer closes its channel
// while Run's context is still live (the Elector was closed).
var errObserverClosed = errors.New("observer closed its channel")

// View keeps the current leader of one election, fed by an Observer, so that
// readers (/leader, /leader/watch) never ask the store per request.
//
// Run consumes the observer; Current reads the last value; Subscribe streams
// it. A View is safe for concurrent use. Run may be called once.
type View struct {
	election string
	obs      Observer
	log      *slog.Logger

	changes atomic.Uint64
	started atomic.Bool

	mu      sync.Mutex
	cur     elector.Leader
	known   bool
	prev    termKey // last term seen, for counting changes
	stopped bool    // Run has returned; subscriptions are closed
	subs    map[*subscription]struct{}
	counter ChangeCounter
}

type termKey struct {
	id    string
	token uint64
}

func keyOf(l elector.Leader) termKey { return termKey{id: l.ID, token: l.Token} }

type subscription struct {
	ch   chan elector.Leader
	stop func() bool // stops the context.AfterFunc that unsubscribes
}

// NewView returns a View of election fed by o. log may be nil.
func NewView(election string, o Observer, log *slog.Logger) *View {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &View{
		election: election,
		obs:      o,
		log:      log.With("election", election),
		subs:     make(map[*subscription]struct{}),
	}
}

// CountChanges makes v call c.LeaderChanged once per leader change, in the
// same sense as Changes. Call it before Run; nil turns counting off.
func (v *View) CountChanges(c ChangeCounter) {
	v.mu.Lock()
	v.counter = c
	v.mu.Unlock()
}

// Run consumes the observer until ctx ends, then closes every subscription
// and returns nil. If the observer closes its channel while ctx is still
// live (the Elector was closed), Run also closes the subscriptions and
// returns an error. After Run returns, Current reports the leader as unknown:
// a value that is no longer kept current is not served.
func (v *View) Run(ctx context.Context) error {
	if !v.started.CompareAndSwap(false, true) {
		return errors.New("leader view: run called twice")
	}
	defer v.stop()
	ch := v.obs.Observe(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case l, ok := <-ch:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("leader view of %q: %w", v.election, errObserverClosed)
			}
			v.update(l)
		}
	}
}

// update records l and, when it differs from the current value, hands it to
// every subscriber.
func (v *View) update(l elector.Leader) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.known && sameLeader(v.cur, l) {
		return
	}
	first := !v.known
	v.cur, v.known = l, true
	// A change is a new term: a leader whose (id, token) differs from the
	// last leader seen. "No leader" in between is not a change by itself, so
	// a handover counts once whether or not the gap was observed. The term
	// already in place at the first observation is the baseline.
	if !l.IsZero() {
		k := keyOf(l)
		if !first && k != v.prev {
			v.changes.Add(1)
			if v.counter != nil {
				v.counter.LeaderChanged()
			}
		}
		v.prev = k
	}
	if l.IsZero() {
		v.log.Info("no leader")
	} else {
		v.log.Info("leader", "id", l.ID, "address", l.Address, "fencing_token", l.Token)
	}
	for s := range v.subs {
		offer(s.ch, l)
	}
}

// offer puts l in ch (capacity 1), replacing a value the subscriber has not
// read yet. Only the View sends, and only with v.mu held, so the second send
// cannot block.
func offer(ch chan elector.Leader, l elector.Leader) {
	select {
	case ch <- l:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	ch <- l
}

func sameLeader(a, b elector.Leader) bool {
	return a.ID == b.ID && a.Token == b.Token && a.Address == b.Address && a.Since.Equal(b.Since)
}

func (v *View) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stopped = true
	v.known = false
	v.cur = elector.Leader{}
	for s := range v.subs {
		s.stop()
		close(s.ch)
		delete(v.subs, s)
	}
}

// Current returns the last observed leader; a zero Leader with true means
// "known: nobody leads". ok is false before the first observation and after
// Run has returned (unknown).
func (v *View) Current() (l elector.Leader, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cur, v.known
}

// Changes is the number of leader changes observed: new terms seen after the
// first observation (see ChangeCounter). It backs leader_changes_total.
func (v *View) Changes() uint64 { return v.changes.Load() }

// Subscribe returns a channel that receives the current leader at once (if
// known) and then every change, until ctx ends or Run returns; then it is
// closed.
//
// Each subscriber has a buffer of one value. A subscriber that lags does not
// slow the View or other subscribers: a value it has not read yet is replaced
// by the newer one, so it may skip intermediate leaders but always ends with
// the newest, and never receives an older value after a newer one.
func (v *View) Subscribe(ctx context.Context) <-chan elector.Leader {
	s := &subscription{ch: make(chan elector.Leader, 1)}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stopped || ctx.Err() != nil {
		close(s.ch)
		return s.ch
	}
	if v.known {
		s.ch <- v.cur
	}
	v.subs[s] = struct{}{}
	s.stop = context.AfterFunc(ctx, func() { v.unsubscribe(s) })
	return s.ch
}

func (v *View) unsubscribe(s *subscription) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.subs[s]; ok {
		delete(v.subs, s)
		close(s.ch)
	}
}
