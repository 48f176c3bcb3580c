package rediscore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector/internal/rediskit"
	"github.com/electd/electd/internal/backoff"
)

// Sub is one subscription of an Elector's bus to the election's channel on
// one connection: the single-server bus runs one, Redlock's one per
// server. It subscribes again after every failure, after a backoff, until
// Close, and hands its bus every message and every change of its
// liveness.
type Sub struct {
	cfg SubConfig

	mu     sync.Mutex
	closed bool
	ps     *redis.PubSub
	live   bool          // subscribed, as far as we know
	gen    uint64        // counts (re)subscriptions: messages may have been missed before each
	liveCh chan struct{} // closed while live
}

// SubConfig is what a bus's Sub subscribes to, and whom it tells.
type SubConfig struct {
	Client  redis.UniversalClient
	Channel string
	// Silence is how long the connection may stay silent before it is
	// pinged, and dropped after another (rediskit.Receive).
	Silence time.Duration
	// Bounded subscribes only once the PubSub is recorded, so that Close
	// interrupts a subscription stuck in its handshake (a black-holed
	// server), and bounds that subscription by Silence.
	Bounded bool

	Answered func()               // a subscription was confirmed
	Failed   func(err error)      // the subscription failed (err as received)
	Message  func(payload string) // a message on the channel
	// Live follows every change of the liveness, outside the Sub's lock.
	Live func(live bool)
}

// NewSub returns a Sub, not yet running (see Run).
func NewSub(cfg SubConfig) *Sub {
	return &Sub{cfg: cfg, liveCh: make(chan struct{})}
}

// State reports the subscription generation and whether it is live.
func (s *Sub) State() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen, s.live
}

// LiveCh is closed while the subscription is live.
func (s *Sub) LiveCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.liveCh
}

// Close ends the subscription; Run returns.
func (s *Sub) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.ps != nil {
		_ = s.ps.Close()
	}
}

// Run subscribes until c's context ends or Close, each failure followed
// by c's backoff.
func (s *Sub) Run(c *Core) {
	b := c.NewBackoff()
	for {
		// The PubSub is recorded before it connects (Bounded), so that
		// Close interrupts a subscription stuck in its handshake.
		var ps *redis.PubSub
		if s.cfg.Bounded {
			ps = s.cfg.Client.Subscribe(c.Ctx)
		} else {
			ps = s.cfg.Client.Subscribe(c.Ctx, s.cfg.Channel)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = ps.Close()
			return
		}
		s.ps = ps
		s.mu.Unlock()

		var err error
		if s.cfg.Bounded {
			ctx, cancel := context.WithTimeout(c.Ctx, s.cfg.Silence)
			err = ps.Subscribe(ctx, s.cfg.Channel)
			cancel()
		}
		if err == nil {
			err = s.receive(c, ps, b)
		}
		s.setLive(false)
		_ = ps.Close()
		if c.Ctx.Err() != nil {
			return
		}
		s.cfg.Failed(err)
		if !c.Sleep(c.Ctx, b.Next()) {
			return
		}
	}
}

// receive reads messages until the subscription fails (rediskit.Receive).
func (s *Sub) receive(c *Core, ps *redis.PubSub, b *backoff.Backoff) error {
	return rediskit.Receive(c.Ctx, ps, s.cfg.Silence, func(msg any) {
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				b.Reset()
				s.cfg.Answered()
				s.setLive(true)
			}
		case *redis.Message:
			s.cfg.Message(m.Payload)
		}
	})
}

func (s *Sub) setLive(live bool) {
	s.mu.Lock()
	if live == s.live {
		s.mu.Unlock()
		return
	}
	s.live = live
	if live {
		s.gen++
		close(s.liveCh)
	} else {
		s.liveCh = make(chan struct{})
	}
	s.mu.Unlock()
	s.cfg.Live(live)
}
