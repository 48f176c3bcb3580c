package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
)

// lead begins a term for the candidate node own, first in line (among
// the first Slots) in the listing sent at sent: the node existed then, so
// its session was alive when the server read it, and the ensemble cannot
// expire the session before sent + the negotiated timeout. The term's
// deadline starts there; the write of Since into the node is its first
// renewal.
func (e *Elector) lead(ctx context.Context, s *session, g gen, own string, st *zk.Stat, t elector.Timing, sent time.Time) (*elector.Term, error) {
	clk := e.cfg.Clock
	dl := elector.NewDeadline(clk, t, sent).ReportTo(e.cfg.Instrument)
	since := clk.Now()
	wrote := clk.Now()
	if _, err := do(ctx, s, func(z *zk.Conn) (*zk.Stat, error) { return z.Set(e.base+"/"+own, e.data(since), -1) }); err != nil {
		dl.End(elector.ErrLeaseLost)
		e.leave(s, own)
		return nil, e.abandoned(s, fmt.Errorf("write the term's start into %s: %w", own, err))
	}
	dl.Renewed(wrote)
	self := elector.Leader{ID: e.cfg.ID, Address: e.cfg.Address, Token: uint64(st.Czxid), Since: since}
	term := elector.NewTerm(self, dl, func(context.Context) error {
		e.leave(s, own)
		return nil
	})
	if e.cfg.Slots == 1 {
		term = term.WithSwitchover(e, func(ctx context.Context, id string) error { return e.handTo(ctx, s, own, id) })
	}
	e.log.Info("leading", "token", self.Token, "node", own, "session", fmt.Sprintf("%#x", g.id), "timing", t.String())
	e.wg.Add(1)
	go e.keep(s, g, own, dl, t)
	return term, nil
}

// keep renews the term's deadline until it ends. Every RenewInterval it
// reads its own node (Exists), taking the send time before the request:
// an answer that the node exists proves the session alive when the server
// read it, so the deadline moves to that send time plus the negotiated
// timeout·(1−drift) − ε (elector.Timing). go-zookeeper's own pings count
// for nothing here (it does not say when one was sent and answered). The
// term ends at the earliest of that deadline, the session's end, the
// node's deletion, the resignation and Close; a request that fails only
// misses a renewal.
func (e *Elector) keep(s *session, g gen, own string, dl *elector.Deadline, t elector.Timing) {
	defer e.wg.Done()
	// However the term ends, its node goes (or its session, when the node
	// cannot be deleted): a candidate whose term ended campaigns again from
	// scratch, and must not find itself queued behind its own old node.
	defer func() {
		if !errors.Is(dl.Err(), elector.ErrResigned) { // Resign and ResignTo delete it themselves
			e.leave(s, own)
		}
	}()
	clk := e.cfg.Clock
	p := e.base + "/" + own
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dl.OnEnd(cancel)
	gone := e.watchGone(ctx, s, p)
	for {
		timer := clk.NewTimer(t.RenewInterval)
		select {
		case <-dl.Done():
			timer.Stop()
			return
		case <-e.closed:
			timer.Stop()
			dl.End(elector.ErrClosed)
			return
		case <-g.lost:
			timer.Stop()
			dl.End(elector.ErrLeaseLost)
			return
		case err := <-gone:
			timer.Stop()
			if err == nil {
				dl.End(elector.ErrLeadershipLost)
				return
			}
			// A watch dropped on a reconnection: a new one.
			e.log.Debug("watch on the leader node dropped", "err", err)
			gone = e.watchGone(ctx, s, p)
			continue
		case <-timer.C():
		}
		sent := clk.Now()
		rctx, rcancel := context.WithTimeout(ctx, t.RenewInterval)
		ok, err := do(rctx, s, func(z *zk.Conn) (bool, error) {
			ok, _, err := z.Exists(p)
			return ok, err
		})
		rcancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				e.cfg.Instrument.StoreError("renew", err)
				e.log.Warn("renewal failed; the term lasts until its deadline", "err", err, "valid_until", dl.ValidUntil())
			}
		case !ok:
			dl.End(elector.ErrLeadershipLost)
			return
		default:
			e.cfg.Instrument.StoreAnswered("renew")
			dl.Renewed(sent)
		}
	}
}

// watchGone watches node p: its channel receives nil when p is deleted (or
// found gone), or the error that dropped the watch; nothing when ctx ends.
func (e *Elector) watchGone(ctx context.Context, s *session, p string) <-chan error {
	out := make(chan error, 1)
	type w struct {
		ok bool
		ch <-chan zk.Event
	}
	r, err := do(ctx, s, func(z *zk.Conn) (w, error) {
		ok, _, ch, err := z.ExistsW(p)
		return w{ok, ch}, err
	})
	switch {
	case err != nil:
		out <- fmt.Errorf("watch %s: %w", p, err)
		return out
	case !r.ok:
		out <- nil
		return out
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		select {
		case ev := <-r.ch:
			switch ev.Type {
			case zk.EventNodeDeleted:
				out <- nil
			case zk.EventNotWatching:
				out <- fmt.Errorf("watch on %s dropped: %w", p, ev.Err)
			default:
				out <- errors.New("watch on " + p + " fired: " + ev.Type.String())
			}
		case <-ctx.Done():
		case <-s.quit:
		}
	}()
	return out
}
