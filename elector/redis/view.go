package redis

import (
	"context"
	"sync"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// wakeSlack is added to a deadline read from the server before re-checking,
// so that the re-check lands after the deadline on the server too.
const wakeSlack = 3 * time.Millisecond

// view keeps the current leader, re-read when a message arrives, when the
// subscription is re-established, and when the holder's deadline passes on
// the server's clock (a crashed leader publishes nothing). It publishes into
// an elector.Hub, which queues every change for every Observe channel.
type view struct {
	e       *Elector
	once    sync.Once
	trig    *listener
	leaders *elector.Hub

	mu   sync.Mutex
	gen  uint64 // bus generation the current value was read under
	live bool   // the bus was live when it was read
}

func newView(e *Elector) *view {
	return &view{e: e, leaders: elector.NewHub()}
}

func (v *view) start() {
	v.once.Do(func() {
		v.trig = v.e.bus.add(func(string) bool { return true })
		// Read at once. The bus, already running for a campaign, may have
		// queued a wake-up between add and here: one pending is enough.
		select {
		case v.trig.ch <- byResync:
		default:
		}
		v.e.bus.start()
		v.e.goroutine(v.run)
	})
}

func (v *view) run() {
	defer v.e.bus.remove(v.trig)
	e := v.e
	b := e.newBackoff()
	var timer clock.Timer
	var timerC <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-v.trig.ch:
		case <-timerC:
		}
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
		gen, live := e.bus.state()
		ctx, cancel := context.WithTimeout(e.ctx, e.callTimeout())
		l, remaining, err := e.readLeader(ctx)
		cancel()
		var wait time.Duration
		if err != nil {
			if e.ctx.Err() != nil {
				return
			}
			e.inst.StoreError("leader", err)
			wait = b.next()
		} else {
			b.reset()
			v.update(l, gen, live)
			if !l.IsZero() {
				wait = remaining + wakeSlack
			}
		}
		if wait > 0 {
			timer = e.cfg.Clock.NewTimer(wait)
			timerC = timer.C()
		}
	}
}

func (v *view) update(l elector.Leader, gen uint64, live bool) {
	v.mu.Lock()
	v.gen, v.live = gen, live
	v.mu.Unlock()
	if old, known := v.leaders.Current(); !known || !sameLeader(old, l) {
		v.e.log.Debug("leader changed", "leader", l.ID, "token", l.Token)
	}
	v.leaders.Publish(l)
}

// current returns the watched leader if the view is in sync with the store:
// read under the subscription that is still live.
func (v *view) current() (elector.Leader, bool) {
	gen, live := v.e.bus.state()
	l, known := v.leaders.Current()
	v.mu.Lock()
	defer v.mu.Unlock()
	return l, known && v.live && live && v.gen == gen
}

// Leader returns the current leader, or ErrNoLeader. Once the watch is in
// sync it answers from memory; before that, or while the subscription is
// broken, it asks Redis.
func (e *Elector) Leader(ctx context.Context) (elector.Leader, error) {
	if e.ctx.Err() != nil {
		return elector.Leader{}, elector.ErrClosed
	}
	e.view.start()
	l, ok := e.view.current()
	if !ok {
		var err error
		if l, _, err = e.readLeader(ctx); err != nil {
			e.inst.StoreError("leader", err)
			return l, &elector.StoreError{Op: "leader", Err: err, Permanent: isPermanent(err)}
		}
	}
	if l.IsZero() {
		return l, elector.ErrNoLeader
	}
	return l, nil
}

// Observe sends the current leader, then every change (a zero Leader for
// none), until ctx ends or the Elector is closed; then it closes the channel.
// Each channel has its own queue: a slow reader misses no change.
func (e *Elector) Observe(ctx context.Context) <-chan elector.Leader {
	e.view.start()
	return e.view.leaders.Subscribe(ctx)
}

// readLeader asks Redis for the live term holder and how long its lease has
// left by the server's clock.
func (e *Elector) readLeader(ctx context.Context) (elector.Leader, time.Duration, error) {
	v, err := viewScript.Run(ctx, e.cfg.Client, []string{e.keys.queue, e.keys.expiry, e.keys.term, e.keys.cand, e.keys.holders}).Result()
	if err != nil {
		return elector.Leader{}, 0, err
	}
	r, ok, err := parseView(v)
	if err != nil {
		return elector.Leader{}, 0, &permanentError{err}
	}
	if !ok {
		return elector.Leader{}, 0, nil
	}
	return elector.Leader{ID: r.id, Address: r.address, Token: r.token, Since: r.since}, r.remaining, nil
}

func sameLeader(a, b elector.Leader) bool {
	return a.ID == b.ID && a.Address == b.Address && a.Token == b.Token && a.Since.Equal(b.Since)
}
