package redis

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

// bus owns the Elector's one pub/sub subscription to the election's channel
// (a rediscore.Sub) and hands each message to the listeners it concerns.
// Every script that changes the queue's head or the term publishes "<mode>
// <head entry>", followed on the next lines by the leader view after the
// change (see viewLua), which the bus hands to the Elector's view.
type bus struct {
	e    *Elector
	once sync.Once
	sub  *rediscore.Sub
	// Listeners are woken by the messages whose head they match (from is
	// always ""), and by every (re)subscription.
	rediscore.Listeners
}

func newBus(e *Elector) *bus {
	h := &bus{e: e}
	h.sub = rediscore.NewSub(rediscore.SubConfig{
		Client:   e.cfg.Client,
		Channel:  e.keys.channel,
		Silence:  max(e.cfg.Timing.TTL, time.Second),
		Answered: func() { e.fails.Answered("watch") },
		Failed:   func(err error) { e.fails.Failed("watch", e.classify(err)) },
		Message:  h.message,
		Live: func(live bool) {
			if live {
				h.Notify("", "", true)
			}
		},
	})
	return h
}

// start subscribes in the background, once.
func (h *bus) start() { h.once.Do(func() { h.e.core.Life.Go(func() { h.sub.Run(h.e.core) }) }) }

// state reports the subscription generation and whether it is live.
func (h *bus) state() (uint64, bool) { return h.sub.State() }

// waitLive waits until subscribed, at most d.
func (h *bus) waitLive(ctx context.Context, d time.Duration) {
	rediscore.WaitLive(ctx, h.e.cfg.Clock, h.sub.LiveCh(), d)
}

func (h *bus) close() { h.sub.Close() }

// message hands a message's view to the Elector's view, and wakes the
// listeners its head concerns.
func (h *bus) message(payload string) {
	first, rest, hasView := strings.Cut(payload, "\n")
	mode, head, _ := strings.Cut(first, " ")
	switch {
	case hasView:
		h.offerView(rest)
	case mode != "grant":
		// A change reported without the view (an electd from before views
		// were published, during a rolling upgrade): the view reads the
		// state itself.
		h.e.view.refresh()
	}
	h.Notify(head, "", false)
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
