package redlock

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
	"github.com/electd/electd/internal/backoff"
)

// bus owns the Elector's subscriptions, one per server, to the election's
// channel, and hands each message to the listeners it concerns: a step
// that changes a server's term or head publishes "<mode> <head> <from>"
// there (from: the entry whose step it was),
// followed by that server's leader view.
type bus struct {
	e    *Elector
	once sync.Once

	mu      sync.Mutex
	closed  bool
	subs    []*redis.PubSub
	live    []bool
	gens    []uint64      // per server: counts (re)subscriptions
	anyLive chan struct{} // closed once a majority is live
	nlive   int
	// Listeners are woken by the messages whose head, and the entry whose
	// step published them (from; "" if not given), they match, and by
	// every (re)subscription.
	rediscore.Listeners
}

func newBus(e *Elector) *bus {
	n := len(e.cfg.Servers)
	return &bus{e: e, subs: make([]*redis.PubSub, n), live: make([]bool, n), gens: make([]uint64, n),
		anyLive: make(chan struct{})}
}

// start subscribes to every server in the background, once.
func (h *bus) start() {
	h.once.Do(func() {
		for i := range h.e.cfg.Servers {
			h.e.core.Life.Go(func() { h.run(i) })
		}
	})
}

// gen is server i's subscription generation, 0 while it is not live.
func (h *bus) gen(i int) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.live[i] {
		return 0
	}
	return h.gens[i]
}

// waitLive waits until a majority of the subscriptions are live, at most d.
func (h *bus) waitLive(ctx context.Context, d time.Duration) {
	rediscore.WaitLive(ctx, h.e.cfg.Clock, h.anyLive, d)
}

func (h *bus) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, ps := range h.subs {
		if ps != nil {
			_ = ps.Close()
		}
	}
}

func (h *bus) run(i int) {
	e := h.e
	b := e.core.NewBackoff()
	for {
		// The PubSub is recorded before it connects, so that close
		// interrupts a subscription stuck in its handshake (a black-holed
		// server); the subscription itself is bounded by a timeout.
		ps := e.cfg.Servers[i].Client.Subscribe(e.ctx)
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			_ = ps.Close()
			return
		}
		h.subs[i] = ps
		h.mu.Unlock()

		ctx, cancel := context.WithTimeout(e.ctx, max(e.cfg.Timing.TTL, time.Second))
		err := ps.Subscribe(ctx, e.keys.channel)
		cancel()
		if err == nil {
			err = h.receive(i, ps, b)
		}
		h.setLive(i, false)
		_ = ps.Close()
		if e.ctx.Err() != nil {
			return
		}
		e.fails[i].Failed("watch", rediskit.Classify(err))
		if !e.core.Sleep(e.ctx, b.Next()) {
			return
		}
	}
}

// receive reads server i's messages until its subscription fails
// (rediskit.Receive: a connection silent for a TTL is pinged; silent for
// another, dropped).
func (h *bus) receive(i int, ps *redis.PubSub, b *backoff.Backoff) error {
	e := h.e
	return rediskit.Receive(e.ctx, ps, max(e.cfg.Timing.TTL, time.Second), func(msg any) {
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				b.Reset()
				e.fails[i].Answered("watch")
				h.setLive(i, true)
			}
		case *redis.Message:
			first, rest, hasView := strings.Cut(m.Payload, "\n")
			var head, from string // "<mode> <head> <from>"
			if f := strings.Fields(first); len(f) >= 2 {
				head = f[1]
				if len(f) >= 3 {
					from = f[2]
				}
			}
			if hasView {
				if r, err := rediskit.ParseViewFields(strings.Split(rest, "\n")); err != nil {
					e.log.Warn("ignoring a malformed election message", "server", e.cfg.Servers[i].Addr, "err", err)
				} else {
					e.view.offer(i, r, h.gen(i))
				}
			}
			h.Notify(head, from, false)
		}
	})
}

func (h *bus) setLive(i int, live bool) {
	h.mu.Lock()
	if live == h.live[i] {
		h.mu.Unlock()
		return
	}
	h.live[i] = live
	if live {
		h.gens[i]++
		h.nlive++
		if h.nlive == majority(len(h.live)) {
			select {
			case <-h.anyLive:
			default:
				close(h.anyLive)
			}
		}
	} else {
		h.nlive--
	}
	h.mu.Unlock()
	h.e.view.resync(i)
	if live {
		h.Notify("", "", true)
	}
}
