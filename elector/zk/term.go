package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// lead begins a term for the candidate node own, first in line (among
// the first Slots). Its first deadline comes from the rule every renewal
// follows (prove): the write of Since into the node goes through the
// ensemble's leader, so the latest request of ours answered on the same
// connection at least lag before that write was sent vouches for the
// session from its send time, once a write after the write's answer
// (stamp) has followed its relay (relayed), when that leaves what a
// renewal leaves (firstRoom); else the term proves the session (prove: lag
// after the write's answer, a Sync, a write and a read).
func (e *Elector) lead(ctx context.Context, s *session, g gen, own string, st *zk.Stat, t elector.Timing, lag time.Duration) (*elector.Term, error) {
	clk := e.cfg.Clock
	p := e.base + "/" + own
	since := clk.Now()
	wire := s.current()
	wrote := clk.Now()
	if _, err := do(ctx, s, func(z *zk.Conn) (*zk.Stat, error) { return z.Set(p, e.data(since), -1) }); err != nil {
		e.leave(s, own)
		return nil, e.abandoned(s, fmt.Errorf("write the term's start into %s: %w", own, err))
	}
	// The write went through the ensemble's leader like a proof's Sync
	// (relayed): the stamp after its answer follows the relay of the
	// request answered lag before the write, whose send time is the
	// evidence when that leaves what a renewal leaves (firstRoom); else
	// prove.
	roomy := func(sent time.Time) bool { return t.DeadlineAfter(sent).Sub(clk.Now()) >= firstRoom(t, lag) }
	sent, ok := evidence(s, wire, wrote, lag)
	if ok && roomy(sent) {
		if _, err := do(ctx, s, e.stamp); err != nil {
			e.leave(s, own)
			return nil, e.abandoned(s, fmt.Errorf("stamp %s after the term's start: %w", e.renewals, err))
		}
		_, ok = evidence(s, wire, wrote, lag) // still on the write's connection
		ok = ok && roomy(sent)                // and the stamp (the node's first create) left room
	} else {
		ok = false
	}
	if !ok {
		var found bool
		var err error
		if sent, found, err = e.prove(ctx, s, p, lag, t.Window(), wrote.Add(-time.Nanosecond)); err == nil && !found {
			err = fmt.Errorf("candidate node %s deleted (session %#x ended)", own, g.id)
		}
		if err != nil {
			e.leave(s, own)
			return nil, e.abandoned(s, fmt.Errorf("prove the session at the term's start: %w", err))
		}
	}
	dl := elector.NewDeadline(clk, t, sent).ReportTo(e.cfg.Instrument)
	dl.Renewed(sent) // reported as the term's first renewal
	self := elector.Leader{ID: e.cfg.ID, Address: e.cfg.Address, Token: uint64(st.Czxid), Since: since}
	term := elector.NewTerm(self, dl, func(context.Context) error {
		e.leave(s, own)
		return nil
	})
	if e.cfg.Slots == 1 {
		term = term.WithSwitchover(e, func(ctx context.Context, id string) error { return e.handTo(ctx, s, own, id) })
	}
	e.log.Info("leading", "token", self.Token, "node", own, "session", fmt.Sprintf("%#x", g.id), "timing", t.String())
	if !e.spawn(func() { e.keep(s, g, own, dl, t, lag) }) {
		dl.End(elector.ErrClosed) // Close closes the session: the node goes with it
		return nil, elector.ErrClosed
	}
	return term, nil
}

// firstRoom is the least time a term's first deadline must leave when it
// starts on evidence older than its write: room for a missed renewal (each
// takes lag and a round trip), as Timing.Validate asks of the window, and
// no less than a renewal leaves with one interval between renewals. A
// supervisor stops its child at
// ValidUntil − stop timeout − StopMargin, and its stop timeout may use the
// window less two renewal intervals: a first deadline shorter than a
// renewal's would stop the child before the first renewal lands.
func firstRoom(t elector.Timing, lag time.Duration) time.Duration {
	return max(2*t.RenewInterval+lag, t.Window()-t.RenewInterval)
}

// keep renews the term's deadline until it ends. Every RenewInterval
// (from the start of the last renewal) it proves the session alive at the
// ensemble's leader (prove: a touch, lag after its answer a Sync, then a
// write) and moves the
// deadline to the send time of the request that proof vouches for plus the
// negotiated timeout·(1−drift) − ε (elector.Timing). The term ends at the
// earliest of that deadline, the session's end, the node's deletion, the
// resignation and Close; a proof that fails only misses a renewal.
func (e *Elector) keep(s *session, g gen, own string, dl *elector.Deadline, t elector.Timing, lag time.Duration) {
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
	// Close and the session's end end the term at once, whatever a
	// renewal under way is waiting for.
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		select {
		case <-dl.Done():
		case <-e.closed:
			dl.End(elector.ErrClosed)
		case <-g.lost:
			dl.End(elector.ErrLeaseLost)
		}
	}()
	gone := e.watchGone(ctx, s, p)
	began := dl.ValidUntil().Add(-t.Window()) // the term's first evidence
	for {
		// A renewal's touch is its evidence, and touches go out an interval
		// apart however long a renewal takes (lag and three round trips);
		// on a link whose round trip exceeds the interval less lag, the
		// previous renewal's requests are the fresher evidence (touch
		// false), and the next renewal comes an interval after the last.
		wire := s.current()
		touch := wire == nil || wire.roundTrip() <= t.RenewInterval-lag
		every := t.RenewInterval
		if touch {
			every = max(0, began.Add(t.RenewInterval).Sub(clk.Now()))
		}
		timer := clk.NewTimer(every)
		select {
		case <-dl.Done():
			timer.Stop()
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
		began = clk.Now()
		after := dl.ValidUntil().Add(-t.Window())
		if touch {
			after = clk.Now() // a request sent from now on
		}
		sent, ok, err := e.prove(ctx, s, p, lag, t.RenewInterval, after)
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

// prove shows that the ensemble's LEADER has heard from the session, and
// returns the send time that proof vouches for and whether node p still
// exists. A read proves nothing (a follower cut off from the leader
// answers reads from memory); a Sync must pass through the leader, which
// applies every touch the follower relayed before forwarding it (in its
// answers to the leader's pings, every tickTime/2, on the same stream).
// So: take the earliest request of ours on the current connection sent
// after after (lead's write of the term's start), or send a read of p to
// be one (the touch: a renewal's); wait until lag has passed since its
// ANSWER; then Sync p, and once that is answered write the election's
// renewals node (stamp), with a read of p alongside (the node still
// there): relayed says why both. The
// evidence is the latest send time of a request of ours answered on that
// same connection at least lag before the first Sync was sent (evidence).
// Each step is abandoned after each.
func (e *Elector) prove(ctx context.Context, s *session, p string, lag, each time.Duration, after time.Time) (time.Time, bool, error) {
	clk := e.cfg.Clock
	exists := existsOf(p)
	wire := s.current()
	if wire == nil {
		return time.Time{}, false, errLinkChanged
	}
	rctx, cancel := context.WithTimeout(ctx, each)
	defer cancel()
	a, ok := wire.firstAnswer(after)
	if !ok {
		if _, err := do(rctx, s, exists); err != nil {
			return time.Time{}, false, fmt.Errorf("read %s: %w", p, err)
		}
		if a, ok = wire.firstAnswer(after); !ok {
			return time.Time{}, false, errLinkChanged
		}
	}
	if wait := a.Add(lag).Sub(clk.Now()); wait > 0 {
		if err := clock.Sleep(ctx, clk, wait); err != nil {
			return time.Time{}, false, err
		}
	}
	synced := clk.Now()
	sctx, scancel := context.WithTimeout(ctx, each)
	defer scancel()
	if _, err := do(sctx, s, func(z *zk.Conn) (string, error) { return z.Sync(p) }); err != nil {
		return time.Time{}, false, fmt.Errorf("sync %s: %w", p, err)
	}
	// The stamp follows the relay (see relayed).
	actx, acancel := context.WithTimeout(ctx, each)
	defer acancel()
	passed := start(s, e.stamp)
	check := start(s, exists)
	if _, err := passed.wait(actx); err != nil {
		return time.Time{}, false, fmt.Errorf("stamp %s: %w", e.renewals, err)
	}
	found, err := check.wait(actx)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read %s: %w", p, err)
	}
	sent, ok := evidence(s, wire, synced, lag)
	if !ok {
		return time.Time{}, false, errLinkChanged
	}
	return sent, found, nil
}

// relayed: why a proof takes a Sync and then a write. The ensemble's
// leader L answers the Sync at least lag after the touch reached the
// follower F (the client sent it lag after the touch's answer), and lag
// exceeds L's ping period: so a ping L sent after the touch precedes that
// answer on the L→F stream, and F answers the ping, relaying the touch,
// before it passes the Sync's answer on. The write (stamp), sent after
// that answer, follows the relay on the F→L stream, and L processes the
// two in order: it checks the session before it takes a write, and
// commits it only on a quorum, which a leader that has lost its followers
// (still serving for syncLimit ticks, while the others elect another) does
// not have. One Sync proves less: it may overtake a relay that a stall of
// the L→F stream held back (F had no ping to answer yet), and that relay
// may never reach L (TestTermEvidenceLeaderToFollowerStall); a second Sync
// is answered by a lingering old leader alone, and without a check of the
// session (TestTermSync2OldLeaderLingers).

// stamp writes the election's renewals node (e.renewals, beside the
// elections: nobody watches or lists it), creating it and its parents the
// first time (put): a write the ensemble's leader checks the session
// for, commits on a quorum, and orders after the touches relayed before it
// (relayed).
func (e *Elector) stamp(z *zk.Conn) (struct{}, error) {
	return struct{}{}, put(z, e.renewals, nil, e.cfg.Store.acl())
}

// evidence is the send time of the latest request of ours answered on
// wire at least lag before a request that went through the ensemble's
// leader was sent (at or after via) on wire and answered: false when the
// client has changed connection since (the request may have gone on
// another one), or when no answer is that old.
func evidence(s *session, wire *link, via time.Time, lag time.Duration) (time.Time, bool) {
	if wire == nil || s.current() != wire {
		return time.Time{}, false
	}
	return wire.before(via.Add(-lag))
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
