package redlock

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

// bus owns the Elector's subscriptions, one per server (rediscore.Sub), to
// the election's channel, and hands each message to the listeners it
// concerns: a step that changes a server's term or head publishes "<mode>
// <head> <from>" there (from: the entry whose step it was), followed by
// that server's leader view.
type bus struct {
	e    *Elector
	once sync.Once
	subs []*rediscore.Sub

	mu      sync.Mutex
	anyLive chan struct{} // closed once a majority is live
	nlive   int
	// Listeners are woken by the messages whose head, and the entry whose
	// step published them (from; "" if not given), they match, and by
	// every (re)subscription.
	rediscore.Listeners
}

func newBus(e *Elector) *bus {
	h := &bus{e: e, anyLive: make(chan struct{})}
	for i, s := range e.cfg.Servers {
		h.subs = append(h.subs, rediscore.NewSub(rediscore.SubConfig{
			Client:   s.Client,
			Channel:  e.keys.channel,
			Silence:  max(e.cfg.Timing.TTL, time.Second),
			Bounded:  true,
			Answered: func() { e.fails[i].Answered("watch") },
			Failed:   func(err error) { e.fails[i].Failed("watch", rediskit.Classify(err)) },
			Message:  func(payload string) { h.message(i, payload) },
			Live:     func(live bool) { h.setLive(i, live) },
		}))
	}
	return h
}

// start subscribes to every server in the background, once.
func (h *bus) start() {
	h.once.Do(func() {
		for _, s := range h.subs {
			h.e.core.Life.Go(func() { s.Run(h.e.core) })
		}
	})
}

// gen is server i's subscription generation, 0 while it is not live.
func (h *bus) gen(i int) uint64 {
	if g, live := h.subs[i].State(); live {
		return g
	}
	return 0
}

// waitLive waits until a majority of the subscriptions are live, at most d.
func (h *bus) waitLive(ctx context.Context, d time.Duration) {
	rediscore.WaitLive(ctx, h.e.cfg.Clock, h.anyLive, d)
}

func (h *bus) close() {
	for _, s := range h.subs {
		s.Close()
	}
}

// message hands server i's view in a message to the Elector's view, and
// wakes the listeners its head concerns.
func (h *bus) message(i int, payload string) {
	first, rest, hasView := strings.Cut(payload, "\n")
	var head, from string // "<mode> <head> <from>"
	if f := strings.Fields(first); len(f) >= 2 {
		head = f[1]
		if len(f) >= 3 {
			from = f[2]
		}
	}
	if hasView {
		if r, err := rediskit.ParseViewFields(strings.Split(rest, "\n")); err != nil {
			h.e.log.Warn("ignoring a malformed election message", "server", h.e.cfg.Servers[i].Addr, "err", err)
		} else {
			h.e.view.offer(i, r, h.gen(i))
		}
	}
	h.Notify(head, from, false)
}

// setLive counts the live subscriptions after server i's changed.
func (h *bus) setLive(i int, live bool) {
	h.mu.Lock()
	if live {
		h.nlive++
		if h.nlive == majority(len(h.subs)) {
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
