package rediscore

import (
	"context"
	"sync"
	"time"

	"github.com/electd/electd/clock"
)

// Listeners are the wake-ups an Elector's bus hands out: each listener is
// woken (a non-blocking send on C) by the messages it matches, and by
// every (re)subscription, after which it must re-read the state.
type Listeners struct {
	mu  sync.Mutex
	set map[*Listener]struct{}
}

// Listener is one waiter on the bus.
type Listener struct {
	// match reports whether a message naming head, published by the step
	// of entry from ("" if not given), concerns the listener.
	match func(head, from string) bool
	// C receives why the listener was woken; one pending wake-up is
	// enough.
	C chan Cause
}

// Cause says why a listener was woken.
type Cause uint8

const (
	ByMessage Cause = iota + 1 // a message naming a head the listener matches
	ByResync                   // a (re)subscription: messages may have been missed
)

// Add registers a listener for the messages match accepts.
func (s *Listeners) Add(match func(head, from string) bool) *Listener {
	l := &Listener{match: match, C: make(chan Cause, 1)}
	s.mu.Lock()
	if s.set == nil {
		s.set = map[*Listener]struct{}{}
	}
	s.set[l] = struct{}{}
	s.mu.Unlock()
	return l
}

// Remove unregisters l.
func (s *Listeners) Remove(l *Listener) {
	s.mu.Lock()
	delete(s.set, l)
	s.mu.Unlock()
}

// Notify wakes the listeners a message naming head (published by from's
// step) concerns, or all of them, by a (re)subscription.
func (s *Listeners) Notify(head, from string, all bool) {
	why := ByMessage
	if all {
		why = ByResync
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.set {
		if all || l.match(head, from) {
			l.Wake(why)
		}
	}
}

// Wake hands l a wake-up unless one is pending.
func (l *Listener) Wake(why Cause) {
	select {
	case l.C <- why:
	default:
	}
}

// WaitLive waits until live is closed (the bus is subscribed), at most d
// on clk, or until ctx ends.
func WaitLive(ctx context.Context, clk clock.Clock, live <-chan struct{}, d time.Duration) {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-live:
	case <-t.C():
	case <-ctx.Done():
	}
}
