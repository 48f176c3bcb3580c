package zk

import (
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// retryDelay is the pause before a campaign starts again after a store
// error that a retry may fix.
const retryDelay = 200 * time.Millisecond

// Campaign queues this candidate (an ephemeral sequential node) and waits
// until it is among the first Slots, watching only the nodes just ahead.
func (e *Elector) Campaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, false)
}

// TryCampaign queues this candidate and, unless it holds at once, leaves
// again and returns elector.ErrBusy.
func (e *Elector) TryCampaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, true)
}

// campaign runs attempts until one leads or fails for good. An attempt
// that fails on a store error leaves nothing behind and starts again from
// scratch, in whatever session the client holds by then: a node of an
// earlier session is never trusted.
func (e *Elector) campaign(ctx context.Context, try bool) (*elector.Term, error) {
	for {
		term, err := e.attempt(ctx, try)
		var se *elector.StoreError
		if err == nil || !errors.As(err, &se) || se.Permanent {
			return term, err
		}
		e.cfg.Instrument.StoreError("campaign", se.Err)
		e.log.Warn("campaign: store error, starting again", "err", err)
		t := e.cfg.Clock.NewTimer(retryDelay)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-e.closed:
			t.Stop()
			return nil, elector.ErrClosed
		}
	}
}

// attempt is one campaign in one session.
func (e *Elector) attempt(ctx context.Context, try bool) (*elector.Term, error) {
	s, err := e.session()
	if err != nil {
		return nil, storeErr("campaign", err)
	}
	g, err := s.ready(ctx)
	if err != nil {
		return nil, e.abandoned(s, err)
	}
	timing, err := e.timing(g)
	if err != nil {
		return nil, err
	}
	lag := timing.Lag
	own, st, err := e.join(ctx, s, g)
	if err != nil {
		return nil, err
	}
	checked := false
	for {
		l, err := e.line(ctx, s)
		if err != nil {
			e.leave(s, own)
			return nil, e.abandoned(s, fmt.Errorf("list the election: %w", err))
		}
		if indexOf(l.all, own) < 0 {
			// Our node is gone: its session ended.
			return nil, storeErr("campaign", fmt.Errorf("candidate node %s deleted (session %#x ended)", own, g.id))
		}
		if seq, _ := seqOf(own); seq < l.floor {
			// Passed by a switchover: queue again, behind its target.
			e.leave(s, own)
			if own, st, err = e.join(ctx, s, g); err != nil {
				return nil, err
			}
			continue
		}
		el := l.eligible()
		i := indexOf(el, own)
		if !checked {
			if err := e.checkSlots(ctx, s, el, own); err != nil {
				e.leave(s, own)
				return nil, err
			}
			checked = true
		}
		if i < e.cfg.Slots {
			return e.lead(ctx, s, g, own, st, timing, lag)
		}
		if try {
			e.leave(s, own)
			return nil, elector.ErrBusy
		}
		var warm time.Duration
		if i < 2*e.cfg.Slots {
			warm = warmEvery(timing, lag)
		}
		woken, err := e.waitAhead(ctx, s, el[max(0, i-e.cfg.Slots):i], own, warm, l.hzxid)
		if err != nil {
			e.leave(s, own)
			return nil, e.abandoned(s, err)
		}
		if woken {
			e.wakeups.Add(1)
		}
	}
}

// join creates the candidate's node in session g.
func (e *Elector) join(ctx context.Context, s *session, g gen) (string, *zk.Stat, error) {
	own, st, err := e.enqueue(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			// The create may still land: the session goes, and the node with it.
			e.reset(s, fmt.Errorf("campaign cancelled during its create: %w", ctx.Err()))
			return "", nil, ctx.Err()
		}
		return "", nil, storeErr("campaign", fmt.Errorf("create the candidate node: %w", err))
	}
	if st.EphemeralOwner != g.id {
		// Created in a later session than g: start again in that one.
		e.leave(s, own)
		return "", nil, storeErr("campaign", errors.New("the session changed while the candidate node was created"))
	}
	if !e.stamped.Load() {
		// The renewals node's first create (its parents too) is not left to
		// a term's first proof, whose window it would spend.
		if _, err := do(ctx, s, e.stamp); err != nil {
			e.leave(s, own)
			return "", nil, storeErr("campaign", fmt.Errorf("write %s: %w", e.renewals, err))
		}
		e.stamped.Store(true)
	}
	return own, st, nil
}

// abandoned is the error of an attempt that stops on err: ctx's own, the
// elector closed, or a store error that a new attempt may fix.
func (e *Elector) abandoned(s *session, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, elector.ErrClosed):
		return elector.ErrClosed
	case errors.Is(err, errSessionClosed):
		select {
		case <-e.closed:
			return elector.ErrClosed
		default:
		}
	}
	return storeErr("campaign", err)
}

// enqueue creates the candidate's node (and the election's parents when
// missing) and reads its stat.
func (e *Elector) enqueue(ctx context.Context, s *session) (string, *zk.Stat, error) {
	create := func(z *zk.Conn) (string, error) {
		return z.CreateProtectedEphemeralSequential(e.base+"/"+candidatePrefix, e.data(time.Time{}), e.cfg.Store.acl())
	}
	p, err := do(ctx, s, create)
	if errors.Is(err, zk.ErrNoNode) {
		if err := e.createParents(ctx, s); err != nil {
			return "", nil, err
		}
		p, err = do(ctx, s, create)
	}
	if err != nil {
		return "", nil, err
	}
	own := path.Base(p)
	_, st, ok, err := e.node(ctx, s, own)
	switch {
	case err != nil:
		e.leave(s, own)
		return "", nil, err
	case !ok:
		return "", nil, fmt.Errorf("candidate node %s gone right after its create", own)
	}
	return own, st, nil
}

// createParents creates the election's node and those above it.
func (e *Elector) createParents(ctx context.Context, s *session) error {
	_, err := do(ctx, s, func(z *zk.Conn) (struct{}, error) { return struct{}{}, createPath(z, e.base, e.cfg.Store.acl()) })
	return err
}

// checkSlots refuses a candidate whose slot count differs from that of
// the first other candidate in line.
func (e *Elector) checkSlots(ctx context.Context, s *session, l []string, own string) error {
	for _, name := range l {
		if name == own {
			continue
		}
		d, _, ok, err := e.node(ctx, s, name)
		if err != nil {
			return storeErr("campaign", fmt.Errorf("read %s: %w", name, err))
		}
		if !ok {
			continue
		}
		if d.Slots != e.cfg.Slots {
			return &elector.SlotsError{Election: e.cfg.Election, Mine: e.cfg.Slots, Theirs: d.Slots}
		}
		return nil
	}
	return nil
}

// warmEvery is how often a candidate next in line reads its own node while
// it waits (0: never): often enough that when it is woken, a request of
// its own answered at least lag before its term's write is younger than
// a renewal interval, and the term's first deadline can count from it
// (lead: firstRoom) instead of waiting lag for a proof. One candidate per
// slot pays it: half of RenewInterval less lag.
func warmEvery(t elector.Timing, lag time.Duration) time.Duration {
	if d := (t.RenewInterval - lag) / 2; d >= elector.MinRenewInterval {
		return d
	}
	return 0
}

// waitAhead watches the nodes ahead (the one just ahead; with Slots, the
// Slots just ahead) and returns when one is deleted (true), at once when
// one is already gone (false), or on an error. Every warm (if not 0) it
// reads own, the candidate's node (warmEvery).
func (e *Elector) waitAhead(ctx context.Context, s *session, ahead []string, own string, warm time.Duration, hzxid int64) (bool, error) {
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(e.closed)},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.quit)},
	}
	// A switchover (switchover.go) changes who leads without deleting the
	// nodes ahead: every waiter watches the handover node too. One made
	// after the line was read (hzxid: the handover node then) and before
	// this watch would fire it no more: the line is read again.
	type hwatch struct {
		zxid int64
		ch   <-chan zk.Event
	}
	hw, err := do(ctx, s, func(z *zk.Conn) (hwatch, error) {
		ok, st, ch, err := z.ExistsW(e.base + "/" + handoverNode)
		if !ok || st == nil {
			return hwatch{ch: ch}, err
		}
		return hwatch{st.Mzxid, ch}, err
	})
	if err != nil {
		return false, fmt.Errorf("watch the handover node: %w", err)
	}
	if hw.zxid != hzxid {
		return false, nil
	}
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(hw.ch)})
	for _, name := range ahead {
		type w struct {
			ok bool
			ch <-chan zk.Event
		}
		r, err := do(ctx, s, func(z *zk.Conn) (w, error) {
			ok, _, ch, err := z.ExistsW(e.base + "/" + name)
			return w{ok, ch}, err
		})
		if err != nil {
			return false, fmt.Errorf("watch %s: %w", name, err)
		}
		if !r.ok {
			return false, nil // gone meanwhile: list again
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.ch)})
	}
	tick := len(cases)
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	if warm > 0 {
		timer = e.cfg.Clock.NewTimer(warm)
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C())})
	}
	i, v, _ := reflect.Select(cases)
	for warm > 0 && i == tick {
		if _, err := do(ctx, s, existsOf(e.base+"/"+own)); err != nil && ctx.Err() == nil {
			// Only the fast start is lost: the term's start proves the session.
			e.log.Debug("read the candidate node while waiting", "node", own, "err", err)
		}
		timer = e.cfg.Clock.NewTimer(warm)
		cases[tick].Chan = reflect.ValueOf(timer.C())
		i, v, _ = reflect.Select(cases)
	}
	switch {
	case i == 0 || ctx.Err() != nil:
		// A watch firing because cancelled candidates leave is no wakeup.
		return false, ctx.Err()
	case i == 1:
		return false, elector.ErrClosed
	case i == 2:
		return false, errSessionClosed
	}
	ev, _ := v.Interface().(zk.Event)
	switch ev.Type {
	case zk.EventNotWatching:
		return false, fmt.Errorf("watch on %s dropped: %w", ev.Path, ev.Err)
	case zk.EventNodeDeleted:
		return true, nil
	}
	// The node ahead changed (a new holder writes its term's start into
	// its node): no wakeup, watch again.
	return false, nil
}

// leave deletes the candidate's node; when it cannot, it closes the
// session, and the node goes with it.
func (e *Elector) leave(s *session, own string) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Timing.RenewInterval)
	defer cancel()
	_, err := do(ctx, s, func(z *zk.Conn) (struct{}, error) { return struct{}{}, z.Delete(e.base+"/"+own, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		e.reset(s, fmt.Errorf("delete %s: %w", own, err))
	}
}

func indexOf(l []string, name string) int {
	for i, n := range l {
		if n == name {
			return i
		}
	}
	return -1
}
