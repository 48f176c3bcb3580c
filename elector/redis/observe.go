package redis

import (
	"context"
	"sync"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

// view keeps the current leader. Every message that reports a change, and
// every reply of this candidate's own renewal script, carries the leader view
// (see viewLua), which is applied without a read, so a leader change costs
// no request per watcher. The view is read
// from Redis when the subscription is (re)established (messages may have been
// missed) and when the holder's deadline passes on the server's clock (a
// crashed leader publishes nothing). It publishes into an elector.Hub, which
// queues every change for every Observe channel.
type view struct {
	e       *Elector
	once    sync.Once
	leaders *elector.Hub

	mu      sync.Mutex
	trig    *rediscore.Listener // nil until started
	gen     uint64              // bus generation the current value was read under
	live    bool                // the bus was live when it was read
	at      time.Time           // server time of the current value
	pending *offered            // the newest offered view not yet applied
	stale   bool                // a change was reported without its view: read
}

// offered is a leader view carried by a message or a renewal reply, with
// the subscription generation it was read under.
type offered struct {
	r   rediskit.View
	gen uint64
}

func newView(e *Elector) *view {
	return &view{e: e, leaders: elector.NewHub()}
}

func (v *view) start() {
	v.once.Do(func() {
		// Messages reach the view through offer, not the listener's match.
		trig := v.e.bus.Add(func(string, string) bool { return false })
		v.mu.Lock()
		v.trig = trig
		v.mu.Unlock()
		// Read at once. The bus, already running for a campaign, may have
		// queued a wake-up between add and here: one pending is enough.
		trig.Wake(rediscore.ByResync)
		v.e.bus.start()
		v.e.core.Life.Go(v.run)
	})
}

// offer hands the view the leader view a message or a renewal reply carried,
// read under subscription generation gen; the newest wins. One read while
// the subscription is down or was since re-established is dropped: the
// (re)subscription makes the view read the state itself.
func (v *view) offer(r rediskit.View, gen uint64) {
	v.e.core.SawToken(r.Token)
	if now, live := v.e.bus.state(); !live || now != gen {
		return
	}
	v.mu.Lock()
	trig := v.trig
	if trig != nil && (v.pending == nil || !r.At.Before(v.pending.r.At)) {
		v.pending = &offered{r: r, gen: gen}
	}
	v.mu.Unlock()
	if trig == nil {
		return // not started: nobody watches
	}
	trig.Wake(rediscore.ByMessage)
}

// refresh makes a started view read the state itself.
func (v *view) refresh() {
	v.mu.Lock()
	trig := v.trig
	v.stale = trig != nil
	v.mu.Unlock()
	if trig == nil {
		return
	}
	trig.Wake(rediscore.ByResync)
}

// fromOffer applies the pending offered view if it was read under the live
// subscription gen and is not older than the current value.
func (v *view) fromOffer(gen uint64, live bool) (rediskit.View, bool) {
	v.mu.Lock()
	p := v.pending
	v.pending = nil
	ok := p != nil && live && p.gen == gen && !p.r.At.Before(v.at) && !v.stale
	v.mu.Unlock()
	if !ok {
		return rediskit.View{}, false
	}
	v.update(p.r, gen, live)
	return p.r, true
}

func (v *view) run() {
	defer v.e.bus.Remove(v.trig)
	e := v.e
	b := e.core.NewBackoff()
	alarm := rediscore.NewAlarm(e.cfg.Clock)
	defer alarm.Stop()
	for {
		why := rediscore.Cause(0) // the timer
		select {
		case <-e.ctx.Done():
			return
		case why = <-v.trig.C:
		case <-alarm.C():
		}
		gen, live := e.bus.state()
		r, applied := v.fromOffer(gen, live)
		if !applied && why == rediscore.ByMessage && v.inSync(gen, live) {
			continue // an old offer: the current value is newer
		}
		alarm.Stop()
		var wait time.Duration
		if !applied {
			v.mu.Lock()
			v.stale = false // the read is newer; a refresh from now on reads again
			v.mu.Unlock()
			ctx, cancel := e.request(e.ctx)
			var err error
			r, err = e.readLeader(ctx)
			cancel()
			if err != nil {
				if e.ctx.Err() != nil {
					return
				}
				e.fails.Failed("leader", err)
				wait = b.Next()
			} else {
				b.Reset()
				e.fails.Answered("leader")
				v.update(r, gen, live)
			}
		}
		if wait == 0 && r.OK {
			wait = r.Remaining + rediscore.WakeSlack
		}
		if wait > 0 {
			alarm.Set(wait)
		}
	}
}

// inSync reports whether the current value was read under the live
// subscription gen, and no change has been reported without its view since.
func (v *view) inSync(gen uint64, live bool) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return live && v.live && v.gen == gen && !v.stale
}

func (v *view) update(r rediskit.View, gen uint64, live bool) {
	v.e.core.SawToken(r.Token)
	l := r.Leader()
	v.mu.Lock()
	v.gen, v.live, v.at = gen, live, r.At
	v.mu.Unlock()
	if v.leaders.Publish(l) != elector.Unchanged {
		v.e.log.Debug("leader changed", "leader", l.ID, "token", l.Token)
	}
}

// current returns the watched leader if the view is in sync with the store:
// read under the subscription that is still live.
func (v *view) current() (elector.Leader, bool) {
	gen, live := v.e.bus.state()
	l, known := v.leaders.Current()
	v.mu.Lock()
	defer v.mu.Unlock()
	return l, known && v.live && live && v.gen == gen && !v.stale
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
		r, err := e.readLeader(ctx)
		if err != nil {
			return elector.Leader{}, rediscore.StoreError(e.inst, "leader", err)
		}
		l = r.Leader()
	}
	return rediscore.LeaderOrNone(l)
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
func (e *Elector) readLeader(ctx context.Context) (rediskit.View, error) {
	return rediscore.ReadView(ctx, viewScript, e.cfg.Client, []string{e.keys.queue, e.keys.expiry, e.keys.term, e.keys.cand, e.keys.holders}, e.patience, e.classify)
}
