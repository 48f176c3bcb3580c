package redis

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

// bus owns the Elector's one pub/sub subscription to the election's channel
// and hands each message to the listeners it concerns. Every script that
// changes the queue's head or the term publishes "<mode> <head entry>",
// followed on the next lines by the leader view after the change (see
// viewLua), which the bus hands to the Elector's view.
type bus struct {
	e    *Elector
	once sync.Once

	mu     sync.Mutex
	ps     *redis.PubSub
	closed bool
	live   bool          // subscribed, as far as we know
	gen    uint64        // counts (re)subscriptions: messages may have been missed before each
	liveCh chan struct{} // closed while live
	// Listeners are woken by the messages whose head they match (from is
	// always ""), and by every (re)subscription.
	rediscore.Listeners
}

func newBus(e *Elector) *bus {
	return &bus{e: e, liveCh: make(chan struct{})}
}

// start subscribes in the background, once.
func (h *bus) start() { h.once.Do(func() { h.e.core.Life.Go(h.run) }) }

// state reports the subscription generation and whether it is live.
func (h *bus) state() (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gen, h.live
}

// waitLive waits until subscribed, at most d.
func (h *bus) waitLive(ctx context.Context, d time.Duration) {
	h.mu.Lock()
	ch := h.liveCh
	h.mu.Unlock()
	rediscore.WaitLive(ctx, h.e.cfg.Clock, ch, d)
}

func (h *bus) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.ps != nil {
		_ = h.ps.Close()
	}
}

func (h *bus) run() {
	b := h.e.core.NewBackoff()
	for {
		ps := h.e.cfg.Client.Subscribe(h.e.ctx, h.e.keys.channel)
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			_ = ps.Close()
			return
		}
		h.ps = ps
		h.mu.Unlock()

		err := h.receive(ps, b)
		h.setLive(false)
		_ = ps.Close()
		if h.e.ctx.Err() != nil {
			return
		}
		err = classify(err)
		h.e.refreshSlots(err)
		h.e.fails.Failed("watch", err)
		if !h.e.core.Sleep(h.e.ctx, b.Next()) {
			return
		}
	}
}

// receive reads messages until the subscription fails (rediskit.Receive:
// a connection silent for an interval is pinged, silent for another,
// dropped).
func (h *bus) receive(ps *redis.PubSub, b *backoff.Backoff) error {
	return rediskit.Receive(h.e.ctx, ps, max(h.e.cfg.Timing.TTL, time.Second), func(msg any) {
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				b.Reset()
				h.e.fails.Answered("watch")
				h.setLive(true)
			}
		case *redis.Message:
			first, rest, hasView := strings.Cut(m.Payload, "\n")
			mode, head, _ := strings.Cut(first, " ")
			switch {
			case hasView:
				h.offerView(rest)
			case mode != "grant":
				// A change reported without the view (an electd from
				// before views were published, during a rolling
				// upgrade): the view reads the state itself.
				h.e.view.refresh()
			}
			h.Notify(head, "", false)
		}
	})
}

// offerView hands the leader view a message carried to the view, tagged
// with the subscription generation it arrived under.
func (h *bus) offerView(payload string) {
	r, err := rediskit.ParseViewFields(strings.Split(payload, "\n"))
	if err != nil {
		h.e.log.Warn("ignoring a malformed election message", "err", err)
		return
	}
	gen, _ := h.state()
	h.e.view.offer(r, gen)
}

func (h *bus) setLive(live bool) {
	h.mu.Lock()
	if live == h.live {
		h.mu.Unlock()
		return
	}
	h.live = live
	if live {
		h.gen++
		close(h.liveCh)
	} else {
		h.liveCh = make(chan struct{})
	}
	h.mu.Unlock()
	if live {
		h.Notify("", "", true)
	}
}
