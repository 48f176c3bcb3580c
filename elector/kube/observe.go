package kube

import (
	"context"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// Leader returns the current leader as the view shows it (waiting for the
// view's first list), or elector.ErrNoLeader.
func (e *Elector) Leader(ctx context.Context) (elector.Leader, error) {
	e.view.start()
	return e.hub.Leader(ctx)
}

// Observe sends the current leader and then every change, from the view's
// watches (no polling), until ctx ends or the Elector is closed. A holder
// whose Lease has stood unchanged for its duration is sent as "no leader"
// (it stopped renewing; the next candidate may take it).
func (e *Elector) Observe(ctx context.Context) <-chan elector.Leader {
	e.view.start()
	return e.hub.Subscribe(ctx)
}

// publish feeds the hub from the view until the Elector closes: the
// Lease's holder, or "no leader" when there is none or its record has
// stood unchanged for its duration.
func (e *Elector) publish() {
	clk := e.cfg.Clock
	if e.view.wait(e.ctx) != nil {
		return
	}
	for {
		st, changed := e.view.snapshot()
		now := clk.Now()
		ld := elector.Leader{}
		free, at := st.free(now)
		if !free && st.lease != nil {
			ld = holderOf(st.lease.obj) // nil: deleted, its holder unknown
		}
		e.hub.Publish(ld)
		var timer clock.Timer
		var fire <-chan time.Time
		if !at.IsZero() && !free {
			timer = clk.NewTimer(max(at.Sub(now), 0))
			fire = timer.C()
		}
		select {
		case <-e.ctx.Done():
			stopTimer(timer)
			return
		case <-changed:
		case <-fire:
		}
		stopTimer(timer)
	}
}
