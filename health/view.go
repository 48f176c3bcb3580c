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
// from Run, between two observations, with no lock held: it must be quick.
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
// Run consumes the observer and publishes into an elector.Hub; Current reads
// the last value; Subscribe streams it. A View is safe for concurrent use.
// Run may be called once.
type View struct {
	election string
	obs      Observer
	log      *slog.Logger
	hub      *elector.Hub

	changes atomic.Uint64
	started atomic.Bool
	stopped atomic.Bool // Run has returned; subscriptions are closed

	mu      sync.Mutex
	counter ChangeCounter

	// Owned by Run.
	seen  bool           // a value has been observed
	term  elector.Leader // the last leader (not "none") observed
	terms Terms          // one value per term, for /leader and /leader/watch
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
		hub:      elector.NewHub(),
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

// update publishes l and, when it is a new term, counts it.
func (v *View) update(l elector.Leader) {
	l, ok := v.terms.Next(l)
	if !ok {
		return
	}
	c := v.hub.Publish(l)
	if c == elector.Unchanged {
		return
	}
	// A change is a new term: a leader whose term differs from the last
	// leader seen. "No leader" in between is not a change by itself, so a
	// handover counts once whether or not the gap was observed. The term
	// already in place at the first observation is the baseline. A
	// refinement of the current term is never a change.
	if c == elector.Changed && !l.IsZero() {
		if v.seen && !l.SameTerm(v.term) {
			v.changes.Add(1)
			v.mu.Lock()
			counter := v.counter
			v.mu.Unlock()
			if counter != nil {
				counter.LeaderChanged()
			}
		}
		v.term = l
	}
	v.seen = true
	if l.IsZero() {
		v.log.Info("no leader")
	} else {
		v.log.Info("leader", "id", l.ID, "address", l.Address, "fencing_token", l.Token)
	}
}

func (v *View) stop() {
	v.stopped.Store(true)
	v.hub.Close()
}

// Current returns the last observed leader; a zero Leader with true means
// "known: nobody leads". ok is false before the first observation and after
// Run has returned (unknown).
func (v *View) Current() (l elector.Leader, ok bool) {
	if v.stopped.Load() {
		return elector.Leader{}, false
	}
	return v.hub.Current()
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
	return v.hub.SubscribeLatest(ctx)
}

// Terms is what a watcher shows of a stream of leaders: one value per term.
// A backend may publish a term twice with two since values (etcd's
// observers did, first with their own clock, until they learnt to wait
// for the leader's own start time: elector/etcd observe.go); Terms is the
// watchers' guard against any backend that still does. It keeps the
// since a term (the same id and token) was first passed with, and drops a
// value that then differs from the last one passed in nothing else, so
// that /leader/watch and `electd leader --watch` show each term once and
// its since never moves; a new address of the same term still passes.
// "No leader" passes; a term seen again after it passes again, with its
// first since. The zero Terms is ready for use; it is not safe for
// concurrent use.
type Terms struct {
	shown bool           // a value has been passed
	last  elector.Leader // the value passed last
	term  elector.Leader // the last leader (not "none") passed
}

// Next returns l as a watcher should show it, and false when it shows
// nothing new.
func (t *Terms) Next(l elector.Leader) (elector.Leader, bool) {
	if !l.IsZero() && l.SameTerm(t.term) {
		l.Since = t.term.Since // the since it was first shown with
	}
	if t.shown && l.Equal(t.last) {
		return l, false
	}
	t.shown, t.last = true, l
	if !l.IsZero() {
		t.term = l
	}
	return l, true
}
