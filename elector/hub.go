package elector

import (
	"context"
	"strconv"
	"sync"
)

// Hub is the one fan-out of an election's current leader. Backends publish
// into it from their watch and serve Leader and Observe from it; health's
// leader view publishes what it observes and serves /leader and
// /leader/watch from it. It keeps the latest value, drops repeats, and tells
// a new term from a refinement of the same one (see Change).
//
// It has two kinds of subscriber. Subscribe (behind Observe) gets the
// current value and then every change, in order, through its own queue, so
// a slow reader delays only itself and loses nothing. SubscribeLatest gets
// only the newest value: a slow reader skips values it has not read yet.
// Publishing never waits for either. The zero Hub is not usable; call NewHub.
type Hub struct {
	mu     sync.Mutex
	known  bool
	cur    Leader
	subs   map[*hubSub]struct{}
	latest map[*latestSub]struct{}
	synced chan struct{}
	closed chan struct{}
	wg     sync.WaitGroup
}

type hubSub struct {
	mu     sync.Mutex
	queue  []Leader
	notify chan struct{}
}

// latestSub holds at most one value, the newest; only the hub sends on ch or
// closes it, always with h.mu held.
type latestSub struct {
	ch   chan Leader
	stop func() bool // stops the context.AfterFunc that unsubscribes
}

// Change says how a published leader relates to the hub's value before it.
type Change int

const (
	// Unchanged: equal to the current value in every field (Leader.Equal).
	// Publish drops it: no subscriber sees it.
	Unchanged Change = iota
	// Refined: the same term as the current value (Leader.SameTerm) with
	// other details, such as its exact Since or a new Address.
	Refined
	// Changed: another term than the current value: a new holder or token,
	// "no leader" after a leader, a leader after none, or the hub's first
	// value.
	Changed
)

func (c Change) String() string {
	switch c {
	case Unchanged:
		return "unchanged"
	case Refined:
		return "refined"
	case Changed:
		return "changed"
	}
	return "Change(" + strconv.Itoa(int(c)) + ")"
}

// NewHub returns an empty hub that knows no leader yet.
func NewHub() *Hub {
	return &Hub{
		subs:   map[*hubSub]struct{}{},
		latest: map[*latestSub]struct{}{},
		synced: make(chan struct{}),
		closed: make(chan struct{}),
	}
}

// Publish records l as the current leader and hands it to every subscriber
// unless it is Unchanged, and says how it relates to the previous value. The
// first Publish marks the hub as synced.
func (h *Hub) Publish(l Leader) Change {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := Changed
	switch {
	case !h.known:
		close(h.synced)
	case h.cur.Equal(l):
		return Unchanged
	case h.cur.SameTerm(l):
		c = Refined
	}
	h.known, h.cur = true, l
	for s := range h.subs {
		s.push(l)
	}
	for s := range h.latest {
		s.offer(l)
	}
	return c
}

// Current returns the current leader and whether the hub has synced yet.
func (h *Hub) Current() (Leader, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur, h.known
}

// Synced is closed once the first value has been published.
func (h *Hub) Synced() <-chan struct{} { return h.synced }

// Leader waits until the hub has synced (or ctx ends) and returns the
// current leader or ErrNoLeader.
func (h *Hub) Leader(ctx context.Context) (Leader, error) {
	select {
	case <-h.synced:
	case <-h.closed:
		return Leader{}, ErrClosed
	case <-ctx.Done():
		return Leader{}, ctx.Err()
	}
	l, _ := h.Current()
	if l.IsZero() {
		return Leader{}, ErrNoLeader
	}
	return l, nil
}

// Subscribe returns a channel carrying the current leader (once known) and
// then every change, closed when ctx ends or the hub closes.
func (h *Hub) Subscribe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	s := &hubSub{notify: make(chan struct{}, 1)}
	h.mu.Lock()
	select {
	case <-h.closed:
		h.mu.Unlock()
		close(out)
		return out
	default:
	}
	if h.known {
		s.push(h.cur)
	}
	h.subs[s] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		defer close(out)
		defer func() {
			h.mu.Lock()
			delete(h.subs, s)
			h.mu.Unlock()
		}()
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.mu.Unlock()
				select {
				case <-s.notify:
					continue
				case <-ctx.Done():
					return
				case <-h.closed:
					return
				}
			}
			next := s.queue[0]
			s.mu.Unlock()
			select {
			case out <- next:
				s.mu.Lock()
				s.queue = s.queue[1:]
				s.mu.Unlock()
			case <-ctx.Done():
				return
			case <-h.closed:
				return
			}
		}
	}()
	return out
}

// SubscribeLatest returns a channel that holds the current leader at once
// (if known) and then the newest value, closed when ctx ends or the hub
// closes. It buffers one value: a reader that lags skips the values it has
// not read yet, but always ends with the newest and never receives an older
// value after a newer one. It needs no goroutine of its own.
func (h *Hub) SubscribeLatest(ctx context.Context) <-chan Leader {
	s := &latestSub{ch: make(chan Leader, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closed:
		close(s.ch)
		return s.ch
	default:
	}
	if ctx.Err() != nil {
		close(s.ch)
		return s.ch
	}
	if h.known {
		s.ch <- h.cur
	}
	h.latest[s] = struct{}{}
	s.stop = context.AfterFunc(ctx, func() { h.unsubscribeLatest(s) })
	return s.ch
}

func (h *Hub) unsubscribeLatest(s *latestSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.latest[s]; ok {
		delete(h.latest, s)
		close(s.ch)
	}
}

// Close closes every subscriber's channel and waits for their goroutines.
// Later subscriptions get a closed channel.
func (h *Hub) Close() {
	h.mu.Lock()
	select {
	case <-h.closed:
	default:
		close(h.closed)
	}
	for s := range h.latest {
		s.stop()
		close(s.ch)
		delete(h.latest, s)
	}
	h.mu.Unlock()
	h.wg.Wait()
}

func (s *hubSub) push(l Leader) {
	s.mu.Lock()
	s.queue = append(s.queue, l)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// offer puts l in s.ch, replacing a value the subscriber has not read yet.
// Only the hub sends, and only with h.mu held, so the second send cannot
// block.
func (s *latestSub) offer(l Leader) {
	select {
	case s.ch <- l:
		return
	default:
	}
	select {
	case <-s.ch:
	default:
	}
	s.ch <- l
}
