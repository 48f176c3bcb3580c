package elector

import (
	"context"
	"sync"
)

// Hub fans leader changes out to Observe subscribers. Backends publish into
// it from their watch; every subscriber gets the current value and then every
// change, in order, through its own queue, so a slow reader delays only
// itself and loses nothing. The zero Hub is not usable; call NewHub.
type Hub struct {
	mu     sync.Mutex
	known  bool
	cur    Leader
	subs   map[*hubSub]struct{}
	synced chan struct{}
	closed chan struct{}
	wg     sync.WaitGroup
}

type hubSub struct {
	mu     sync.Mutex
	queue  []Leader
	notify chan struct{}
}

// NewHub returns an empty hub that knows no leader yet.
func NewHub() *Hub {
	return &Hub{subs: map[*hubSub]struct{}{}, synced: make(chan struct{}), closed: make(chan struct{})}
}

// Publish records l as the current leader and queues it for every
// subscriber if it differs from the previous value. The first Publish marks
// the hub as synced.
func (h *Hub) Publish(l Leader) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.known && h.cur == l {
		return
	}
	first := !h.known
	h.known, h.cur = true, l
	if first {
		close(h.synced)
	}
	for s := range h.subs {
		s.push(l)
	}
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

// Close closes every subscriber's channel and waits for their goroutines.
func (h *Hub) Close() {
	h.mu.Lock()
	select {
	case <-h.closed:
	default:
		close(h.closed)
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
