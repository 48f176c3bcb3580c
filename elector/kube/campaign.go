package kube

import (
	"context"
	"errors"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// errRejoin ends a candidacy whose ticket is gone (removed as dead while
// this host could not renew it): the campaign joins again at the back.
var errRejoin = errors.New("ticket removed")

// Campaign takes a place in line (a ticket Lease) and blocks until this
// candidate leads, ctx ends, or the API server refuses for good (the
// credentials, or an RBAC verb). Transient errors are retried. A campaign
// that returns an error removes its ticket (best effort; a ticket left
// behind is removed by the waiter behind it once it stops being renewed).
func (e *Elector) Campaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, false)
}

// TryCampaign takes the Lease if it is free and nobody waits for it, and
// returns elector.ErrBusy otherwise. It takes no place in line.
func (e *Elector) TryCampaign(ctx context.Context) (*elector.Term, error) {
	return e.campaign(ctx, true)
}

func (e *Elector) campaign(ctx context.Context, try bool) (*elector.Term, error) {
	ctx, end, err := e.life.Campaign(ctx)
	if err != nil {
		return nil, err
	}
	defer end()

	e.view.start()
	if err := e.view.wait(ctx); err != nil {
		return nil, e.ended(ctx, err)
	}
	if try {
		return e.try(ctx)
	}
	for {
		term, err := e.candidacy(ctx)
		switch {
		case term != nil:
			return term, nil
		case errors.Is(err, errRejoin):
			e.log.Info("this candidate's ticket was removed while it could not renew it; joining the line again")
		default:
			return nil, e.ended(ctx, err)
		}
	}
}

// ended is the error of a campaign that stops with err.
func (e *Elector) ended(ctx context.Context, err error) error {
	switch {
	case e.ctx.Err() != nil:
		return elector.ErrClosed
	case ctx.Err() != nil && !isPermanent(err):
		return ctx.Err()
	case isPermanent(err):
		return &elector.StoreError{Op: "campaign", Err: err, Permanent: true}
	}
	return err
}

// try takes the Lease once if it is free and no live ticket waits.
func (e *Elector) try(ctx context.Context) (*elector.Term, error) {
	b := e.newBackoff()
	for {
		st, err := e.fresh(ctx)
		if err != nil {
			if isPermanent(err) || ctx.Err() != nil {
				return nil, err
			}
			if !e.sleep(ctx, b.Next()) {
				return nil, ctx.Err()
			}
			continue
		}
		now := e.cfg.Clock.Now()
		e.sawLease(st)
		free, _ := st.free(now)
		if h, _, _ := st.head(now, e.cfg.Timing.RenewInterval); h != nil || !free {
			return nil, elector.ErrBusy
		}
		term, err := e.take(ctx, st)
		switch {
		case term != nil:
			return term, nil
		case err == nil:
			return nil, elector.ErrBusy // another candidate took it first
		case isPermanent(err) || ctx.Err() != nil:
			return nil, err
		}
		if !e.sleep(ctx, b.Next()) {
			return nil, ctx.Err()
		}
	}
}

// fresh is the view's state with the Lease read again (a quorum list of
// it by name): the view's watch may not have shown a write that returned
// already, such as a resignation. The list's version (the store's
// revision now) raises the highest version seen, so a token for a Lease
// deleted meanwhile is still above the deleted one's. A version the view
// has seen keeps the time it was first seen.
func (e *Elector) fresh(ctx context.Context) (state, error) {
	cctx, cancel := e.request(ctx)
	defer cancel()
	list, err := e.leases().List(cctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", e.name).String()})
	st, _ := e.view.snapshot()
	if err != nil {
		err = classify(err)
		e.fails.Failed("read", err)
		return st, err
	}
	e.fails.Answered("read")
	at, err := rv(list.ResourceVersion)
	if err != nil {
		return st, &permanentError{err}
	}
	st.maxRV = max(st.maxRV, at)
	if len(list.Items) == 0 {
		// Gone, though the view may not show it yet: its last holder
		// keeps the duration the view saw, as the view's own vanish.
		if st.lease != nil && st.lease.dur > 0 {
			st.gone = &seen{at: e.cfg.Clock.Now(), dur: st.lease.dur}
		}
		st.lease = nil
		return st, nil
	}
	l := &list.Items[0]
	n, err := rv(l.ResourceVersion)
	if err != nil {
		return st, &permanentError{err}
	}
	if st.lease == nil || st.lease.rv != n {
		st.lease = observe(st.lease, st.gone, l, n, e.cfg.Clock.Now())
	}
	return st, nil
}

// candidacy is one ticket's life in line, until it leads (term), its
// ticket is removed (errRejoin), or the campaign ends (err).
func (e *Elector) candidacy(ctx context.Context) (term *elector.Term, err error) {
	t, err := e.join(ctx)
	if err != nil {
		return nil, err
	}
	log := e.log.With("ticket", t.name)
	tctx, stop := context.WithCancel(ctx)
	lost := make(chan struct{})
	if !e.life.Go(func() { e.keepTicket(tctx, t, lost) }) {
		stop()
		return nil, elector.ErrClosed
	}
	defer func() {
		stop()
		if term == nil {
			e.leave(t.name)
		}
	}()
	log.Debug("waiting in line")
	clk, grace := e.cfg.Clock, e.cfg.Timing.RenewInterval
	woken := false
	b := e.newBackoff()
	for {
		now := clk.Now()
		st, changed := e.view.snapshot()
		e.sawLease(st)
		h, dead, headDead := st.head(now, grace)
		var wake time.Time
		if st.lease != nil && st.lease.obj.Annotations[annHandover] == t.name && holder(st.lease.obj) == e.cfg.ID {
			// The holder handed the Lease to this ticket: claim it.
			if woken {
				e.wakeups.Add(1)
			}
			term, err := e.claim(ctx, st.lease)
			switch {
			case term != nil:
				e.life.Go(func() { e.leave(t.name) })
				return term, nil
			case err != nil && isPermanent(err):
				return nil, err
			case err != nil:
				wake = now.Add(b.Next())
			}
		} else if h != nil && h.obj.Name == t.name {
			e.removeDead(ctx, dead)
			free, at := st.free(now)
			if free {
				if woken {
					e.wakeups.Add(1)
				}
				term, err := e.take(ctx, st)
				switch {
				case term != nil:
					e.life.Go(func() { e.leave(t.name) }) // the line no longer needs it
					return term, nil
				case err != nil && isPermanent(err):
					return nil, err
				case err != nil:
					wake = now.Add(b.Next()) // transient: try again soon
				default:
					b.Reset() // another candidate took it: wait for the change
				}
			} else {
				wake = at
			}
		} else if h != nil {
			wake = headDead // the head may stop renewing
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if !wake.IsZero() {
			timer = clk.NewTimer(max(wake.Sub(clk.Now()), 0))
			fire = timer.C()
		}
		select {
		case <-changed:
			woken = true
		case <-fire:
			woken = false
		case <-lost:
			stopTimer(timer)
			return nil, errRejoin
		case <-ctx.Done():
			stopTimer(timer)
			return nil, ctx.Err()
		}
		stopTimer(timer)
	}
}

func stopTimer(t clock.Timer) {
	if t != nil {
		t.Stop()
	}
}

// sawLease raises the highest token seen to the Lease's, unless that is
// above the Lease's own version: no token electd writes is (a token is
// at most the version of the write that carries it), so such a one was
// written by hand, and adopting it would lift this candidate's tokens
// above the versions the next candidate builds on.
func (e *Elector) sawLease(st state) {
	if st.lease != nil {
		if tok := holderOf(st.lease.obj).Token; tok <= st.lease.rv {
			e.sawToken(tok)
		}
	}
}

// take writes this candidate's term into the Lease as st saw it: an update
// conditioned on the resourceVersion observed, so that it fails if
// anything renewed or took it since. It returns the term, or nil and no
// error when another write came first.
//
// The token is one more than the highest of: the version the update is
// conditioned on, every version seen (lists and bookmarks included), and
// every token seen (sawLease). Every earlier grant was a write at a
// version at most the one conditioned on, so the token is above its
// token (see the package doc). Where there is no Lease, take first
// creates one with no holder, and takes that: a create alone would say
// nothing of the writes between the moment this candidate last saw the
// Lease missing and the moment the create lands (a term begun and ended
// meanwhile, the Lease deleted again); the created version is above them
// all.
func (e *Elector) take(ctx context.Context, st state) (*elector.Term, error) {
	l := st.lease
	if l == nil {
		var err error
		if l, err = e.create(ctx); l == nil || err != nil {
			return nil, err
		}
	}
	if _, err := rv(l.obj.ResourceVersion); err != nil {
		return nil, &permanentError{err}
	}
	obj := l.obj.DeepCopy()
	self := elector.Leader{ID: e.cfg.ID, Address: e.cfg.Address, Token: max(st.maxRV, e.seen.Load(), l.rv) + 1}
	got, send, err := e.grantUpdate(ctx, obj, func(send time.Time) { grant(obj, self, e.cfg.Timing.TTL, send) })
	if got == nil {
		return nil, err
	}
	self.Since = got.Spec.AcquireTime.Time // as stored: to the microsecond
	return e.begin(self, send, got)
}

// create makes the election's Lease, with no holder; nil and no error if
// it exists already (the view shows it soon).
func (e *Elector) create(ctx context.Context) (*seen, error) {
	cctx, cancel := e.request(ctx)
	defer cancel()
	obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: e.cfg.Namespace}}
	got, err := e.leases().Create(cctx, obj, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		e.fails.Answered("grant")
		return nil, nil
	case err != nil:
		err = classify(err)
		e.fails.Failed("grant", err)
		return nil, err
	}
	n, err := rv(got.ResourceVersion)
	if err != nil {
		return nil, &permanentError{err}
	}
	return &seen{obj: got, rv: n, at: e.cfg.Clock.Now()}, nil
}

// claim takes the Lease its holder handed to this candidate's ticket
// (see release): an update of the version seen, conditioned on it, that
// renews it and drops the hand-over mark. The term is the one the Lease
// names (its token, its acquireTime); its deadline counts from the
// claim's send time. nil and no error when another write came first.
func (e *Elector) claim(ctx context.Context, l *seen) (*elector.Term, error) {
	obj := l.obj.DeepCopy()
	self := holderOf(obj)
	if self.ID != e.cfg.ID || self.Token == 0 {
		return nil, nil // not a hand-over electd wrote for this candidate
	}
	self.Address = e.cfg.Address
	if self.Address != "" {
		obj.Annotations[annAddress] = self.Address
	} else {
		delete(obj.Annotations, annAddress)
	}
	delete(obj.Annotations, annHandover)
	// One more transition, so that a client-go elector sees a record
	// other than the hand-over's and times this term from the claim.
	n := int32(0)
	if obj.Spec.LeaseTransitions != nil {
		n = *obj.Spec.LeaseTransitions + 1
	}
	obj.Spec.LeaseTransitions = &n
	got, send, err := e.grantUpdate(ctx, obj, func(send time.Time) { renew(obj, e.cfg.Timing.TTL, send) })
	if got == nil {
		return nil, err
	}
	return e.begin(self, send, got)
}

// grantUpdate writes obj, once stamp has stamped it with the write's send
// time, as an update conditioned on its version; got is the Lease
// written, nil (and err nil) when another write came first.
func (e *Elector) grantUpdate(ctx context.Context, obj *coordinationv1.Lease, stamp func(send time.Time)) (got *coordinationv1.Lease, send time.Time, err error) {
	cctx, cancel := e.request(ctx)
	defer cancel()
	send = e.cfg.Clock.Now()
	stamp(send)
	got, err = e.leases().Update(cctx, obj, metav1.UpdateOptions{})
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		e.fails.Answered("grant")
		return nil, send, nil
	case err != nil:
		err = classify(err)
		e.fails.Failed("grant", err)
		return nil, send, err
	}
	e.fails.Answered("grant")
	return got, send, nil
}

// begin starts the term self that a write sent at send made (got is the
// Lease it wrote): its deadline, and hold renewing it.
func (e *Elector) begin(self elector.Leader, send time.Time, got *coordinationv1.Lease) (*elector.Term, error) {
	if _, err := rv(got.ResourceVersion); err != nil {
		return nil, &permanentError{err}
	}
	e.sawToken(self.Token)
	dl := elector.NewDeadline(e.cfg.Clock, e.cfg.Timing, send).ReportTo(e.inst)
	h := &held{lease: got, record: goRecord(got), since: send}
	e.log.Info("leading", "fencing_token", self.Token, "valid_until", dl.ValidUntil())
	if !e.life.Lead(dl, func() { e.hold(dl, h, self) }) {
		dl.End(elector.ErrClosed)
	}
	return elector.NewTerm(self, dl, func(ctx context.Context) error { return e.release(ctx, h, self) }).
		WithSwitchover(e, func(ctx context.Context, id string) error { return e.releaseTo(ctx, h, self, id) }), nil
}
