package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

// view keeps the current leader: the committed holder that a majority of
// the servers name, each server's word being the newest leader view it
// gave (a message, a reply to one of our steps, or a read), and lasting
// until the lease it reported runs out by our clock. A server's view is
// read when its subscription is (re)established (messages may have been
// missed) and when the lease it reported runs out (a renewal publishes
// nothing, and a crashed leader neither). Once in sync, a leader change
// costs the watching copies no request.
type view struct {
	e       *Elector
	once    sync.Once
	leaders *elector.Hub
	trig    chan struct{}

	mu      sync.Mutex
	started bool
	per     []serverView
}

// serverView is one server's latest word.
type serverView struct {
	r      rediskit.View
	until  time.Time // local: when the lease it reported runs out
	gen    uint64    // the subscription generation it was read under
	synced bool      // read under the server's live subscription
}

func newView(e *Elector) *view {
	return &view{e: e, leaders: elector.NewHub(), trig: make(chan struct{}, 1), per: make([]serverView, len(e.cfg.Servers))}
}

func (v *view) start() {
	v.once.Do(func() {
		v.mu.Lock()
		v.started = true
		v.mu.Unlock()
		v.e.bus.start()
		v.e.core.Life.Go(v.run)
		v.kick()
	})
}

func (v *view) kick() {
	select {
	case v.trig <- struct{}{}:
	default:
	}
}

// offer hands the view server i's leader view, read under subscription
// generation gen (0: not live); an older one than it has is dropped.
func (v *view) offer(i int, r rediskit.View, gen uint64) {
	v.e.core.SawToken(r.Token)
	if gen == 0 || gen != v.e.bus.gen(i) {
		return
	}
	v.mu.Lock()
	cur := v.per[i]
	if cur.synced && cur.gen == gen && r.At.Before(cur.r.At) {
		v.mu.Unlock()
		return
	}
	v.per[i] = serverView{r: r, until: v.e.cfg.Clock.Now().Add(r.Remaining), gen: gen, synced: true}
	started := v.started
	v.mu.Unlock()
	if started {
		v.kick()
	}
}

// resync marks server i's word as out of date: its subscription broke or
// was re-established.
func (v *view) resync(i int) {
	v.mu.Lock()
	v.per[i].synced = false
	started := v.started
	v.mu.Unlock()
	if started {
		v.kick()
	}
}

func (v *view) run() {
	e := v.e
	alarm := rediscore.NewAlarm(e.cfg.Clock)
	defer alarm.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-v.trig:
		case <-alarm.C():
		}
		alarm.Stop()
		// Read every live server whose word is out of date or has run out.
		now := e.cfg.Clock.Now()
		stale := make([]bool, len(e.cfg.Servers))
		v.mu.Lock()
		for i, s := range v.per {
			stale[i] = e.bus.gen(i) != 0 && (!s.synced || (s.r.OK && !now.Before(s.until)))
		}
		v.mu.Unlock()
		var failed atomic.Bool
		fanOut(len(stale), func(i int) {
			if !stale[i] {
				return
			}
			gen := e.bus.gen(i)
			ctx, cancel := e.request(e.ctx, i)
			r, err := e.readView(ctx, i)
			cancel()
			if err != nil {
				if e.ctx.Err() == nil {
					e.fails[i].Failed("leader", err)
				}
				failed.Store(true)
				return
			}
			e.fails[i].Answered("leader")
			v.offer(i, r, gen)
		})
		l, next := v.compute(e.cfg.Clock.Now())
		if v.leaders.Publish(l) != elector.Unchanged {
			e.log.Debug("leader changed", "leader", l.ID, "token", l.Token)
		}
		wait := time.Duration(-1)
		if !next.IsZero() {
			wait = max(next.Sub(e.cfg.Clock.Now()), 0) + rediscore.WakeSlack
		}
		if failed.Load() && (wait < 0 || wait > e.core.CallTimeout()) {
			wait = e.core.CallTimeout()
		}
		if wait >= 0 {
			alarm.Set(wait)
		}
	}
}

// compute returns the leader a majority names now, and when the next
// server's word runs out (zero: none does).
func (v *view) compute(now time.Time) (elector.Leader, time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return leaderOf(v.per, now, majority(len(v.per)))
}

// leaderOf is the leader at least m of the servers' words name, by now;
// and the earliest moment one of those words runs out.
func leaderOf(per []serverView, now time.Time, m int) (elector.Leader, time.Time) {
	type key struct {
		id    string
		token uint64
	}
	count := map[key]int{}
	var next time.Time
	for _, s := range per {
		if !s.synced || !s.r.OK || !now.Before(s.until) {
			continue
		}
		count[key{s.r.ID, s.r.Token}]++
		if next.IsZero() || s.until.Before(next) {
			next = s.until
		}
	}
	for _, s := range per {
		if s.synced && s.r.OK && now.Before(s.until) && count[key{s.r.ID, s.r.Token}] >= m {
			return s.r.Leader(), next
		}
	}
	return elector.Leader{}, next
}

// synced reports whether a majority of the servers' words are read under
// their live subscriptions.
func (v *view) synced() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for i, s := range v.per {
		if s.synced && s.gen == v.e.bus.gen(i) {
			n++
		}
	}
	return n >= majority(len(v.per))
}

// Leader returns the current leader, or ErrNoLeader. Once the view is in
// sync with a majority of the servers it answers from memory; before that
// it asks every server.
func (e *Elector) Leader(ctx context.Context) (elector.Leader, error) {
	if e.ctx.Err() != nil {
		return elector.Leader{}, elector.ErrClosed
	}
	e.view.start()
	if e.view.synced() {
		if l, known := e.view.leaders.Current(); known {
			return rediscore.LeaderOrNone(l)
		}
	}
	per := make([]serverView, len(e.cfg.Servers))
	errs := make([]error, len(per))
	fanOut(len(per), func(i int) {
		r, err := e.readView(ctx, i)
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", e.cfg.Servers[i].Addr, err)
			return
		}
		per[i] = serverView{r: r, until: e.cfg.Clock.Now().Add(r.Remaining), synced: true}
	})
	if err := e.quorumErr(errs); err != nil {
		e.inst.StoreError("leader", err)
		return elector.Leader{}, &elector.StoreError{Op: "leader", Err: err}
	}
	l, _ := leaderOf(per, e.cfg.Clock.Now(), e.m)
	return rediscore.LeaderOrNone(l)
}

// Observe sends the current leader, then every change (a zero Leader for
// none), until ctx ends or the Elector is closed; then it closes the
// channel.
func (e *Elector) Observe(ctx context.Context) <-chan elector.Leader {
	e.view.start()
	return e.view.leaders.Subscribe(ctx)
}

// readView asks server i for its leader view.
func (e *Elector) readView(ctx context.Context, i int) (rediskit.View, error) {
	r, err := rediscore.ReadView(ctx, viewScript, e.cfg.Servers[i].Client, e.keys.all(), e.patience[i], rediskit.Classify)
	if err == nil {
		e.core.SawToken(r.Token)
	}
	return r, err
}
