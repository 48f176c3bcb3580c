package elector

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoSwitchover: the term cannot be handed to a named candidate, because
// its backend does not implement Switcher.
var ErrNoSwitchover = errors.New("switchover is not supported by this store")

// ErrNotLeading: the copy asked to resign or hand over does not lead.
var ErrNotLeading = errors.New("not the leader")

// ErrSwitchoverToSelf refuses a switchover to the candidate that leads.
var ErrSwitchoverToSelf = errors.New("the named candidate is the one that already leads")

// NotQueuedError refuses a switchover to a candidate that does not wait in
// the election's queue behind the leader.
type NotQueuedError struct{ ID string }

func (e *NotQueuedError) Error() string {
	return fmt.Sprintf("candidate %q is not queued in this election (check its --id and --election)", e.ID)
}

// Switcher is an Elector whose terms can be handed to a named candidate
// (Term.ResignTo): like a resignation, except that the named candidate
// leads next, and the candidates queued ahead of it step aside (they stay
// queued, after it). Backends that have it assert `var _ elector.Switcher`.
type Switcher interface {
	Elector
	// Queued returns nil when a candidate with this ID waits in the queue
	// behind the leader, a *NotQueuedError when none does, or a store
	// error.
	Queued(ctx context.Context, id string) error
}

// WithSwitchover is for backends that implement Switcher: it lets the term
// be handed over with ResignTo. handTo runs once the term has ended (as
// Resign's function does): in one store operation it removes the term and
// makes candidate id the next to lead; if id has left the queue meanwhile,
// it resigns plainly and returns a *NotQueuedError.
func (t *Term) WithSwitchover(s Switcher, handTo func(ctx context.Context, id string) error) *Term {
	t.sw, t.handTo = s, handTo
	return t
}

// Queued is the term's Switcher's Queued, or ErrNoSwitchover.
func (t *Term) Queued(ctx context.Context, id string) error {
	if t.sw == nil {
		return ErrNoSwitchover
	}
	return t.sw.Queued(ctx, id)
}

// ResignTo ends the term and hands it to candidate id, which leads next
// with a greater token; ErrNoSwitchover if the backend cannot (the term is
// then untouched). Like Resign, it ends the term first, and runs once: a
// term already resigned returns that resignation's result. Callers check
// Queued first, so that a candidate not queued is refused while the term
// still holds.
func (t *Term) ResignTo(ctx context.Context, id string) error {
	if t.handTo == nil {
		return ErrNoSwitchover
	}
	t.once.Do(func() {
		t.dl.End(ErrResigned)
		t.rerr = t.handTo(ctx, id)
	})
	return t.rerr
}
