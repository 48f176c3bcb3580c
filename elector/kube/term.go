package kube

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electd/electd/elector"
)

// held is the Lease of a term as this Elector last wrote or read it.
type held struct {
	mu    sync.Mutex
	lease *coordinationv1.Lease
	// record is the Lease as client-go compares it (goRecord), and since
	// the send time of the first write of this term that made it so: a
	// renewal counts from since, not its own send time, for a client-go
	// elector times the term from its first sight of the record.
	record string
	since  time.Time
	// unknown are the records of writes whose outcome is unknown (timed
	// out, connection lost) since the last acknowledged one, by the send
	// time of the first of each: such a write may have landed, and a
	// client-go elector may time its record from then.
	unknown map[string]time.Time
}

func (h *held) get() *coordinationv1.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease.DeepCopy()
}

func (h *held) set(l *coordinationv1.Lease) {
	h.mu.Lock()
	h.lease = l
	h.mu.Unlock()
}

// renewed records a renewal sent at send that wrote l, and returns the
// time it counts from: send if client-go sees a new record, else the send
// time of the first write of the record it still sees.
func (h *held) renewed(l *coordinationv1.Lease, send time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lease = l
	if r := goRecord(l); r != h.record {
		h.record, h.since = r, send
		if at, ok := h.unknown[r]; ok && at.Before(send) {
			h.since = at
		}
	}
	h.unknown = nil
	return h.since
}

// sent records a write of obj, sent at send, whose outcome is unknown.
func (h *held) sent(obj *coordinationv1.Lease, send time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := goRecord(obj)
	if r == h.record {
		return // counts from since already
	}
	if h.unknown == nil {
		h.unknown = map[string]time.Time{}
	}
	if _, ok := h.unknown[r]; !ok {
		h.unknown[r] = send
	}
}

// hold renews the term's Lease every renewal interval until its deadline
// ends. A renewal is an update conditioned on the version last written,
// and it counts from its send time (elector.Deadline.Renewed). A
// conflict is a write by someone else: if the Lease still names this
// term (a label or annotation changed), the renewal is made again on the
// new version; otherwise the term is lost. The view ends the term too, as
// soon as it shows the Lease deleted or naming another term. Errors are
// retried; the deadline ends the term if none succeeds in time. A term
// ended by Close hands the Lease over.
func (e *Elector) hold(dl *elector.Deadline, h *held, self elector.Leader) {
	clk := e.cfg.Clock
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dl.OnEnd(cancel)
	b := e.renewBackoff()
	due := e.nextRenewal(clk.Now())
	for {
		_, changed := e.view.snapshot()
		if e.lostInView(h, self) {
			dl.End(elector.ErrLeadershipLost)
		}
		timer := clk.NewTimer(max(due.Sub(clk.Now()), 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			if errors.Is(dl.Err(), elector.ErrClosed) {
				rctx, rcancel := context.WithTimeout(context.Background(), e.cleanupTimeout())
				if err := e.release(rctx, h, self); err != nil {
					e.log.Debug("could not hand the Lease over on close; it lapses after one ttl", "err", err)
				}
				rcancel()
			}
			return
		case <-changed:
			timer.Stop()
			continue
		case <-timer.C():
		}
		switch err := e.renewOnce(ctx, dl, h, self); {
		case err == nil:
			b.Reset()
			due = e.nextRenewal(clk.Now())
		case errors.Is(err, elector.ErrLeadershipLost):
			dl.End(err)
		default:
			if ctx.Err() == nil {
				e.fails.Retrying("renew", err, "fencing_token", self.Token)
			}
			due = clk.Now().Add(b.Next())
		}
	}
}

// lostInView reports whether the view shows the term's Lease deleted, or
// naming another term in a version after the one this Elector holds.
func (e *Elector) lostInView(h *held, self elector.Leader) bool {
	st, _ := e.view.snapshot()
	mine, _ := rv(h.get().ResourceVersion)
	if st.lease == nil {
		return st.goneRV > mine
	}
	return st.lease.rv > mine && !holderOf(st.lease.obj).SameTerm(self)
}

// renewOnce makes one renewal; ErrLeadershipLost if the Lease names
// another term, or is gone.
func (e *Elector) renewOnce(ctx context.Context, dl *elector.Deadline, h *held, self elector.Leader) error {
	for range 2 { // once more after a conflict that left the term in place
		obj := h.get()
		send := e.cfg.Clock.Now()
		renew(obj, e.cfg.Timing.TTL, send)
		cctx, cancel := e.request(ctx)
		got, err := e.leases().Update(cctx, obj, metav1.UpdateOptions{})
		cancel()
		switch {
		case err == nil:
			if _, ok := dl.Renewed(h.renewed(got, send)); ok {
				e.fails.Answered("renew")
			}
			return nil
		case apierrors.IsNotFound(err):
			return elector.ErrLeadershipLost
		case !apierrors.IsConflict(err):
			h.sent(obj, send) // it may have landed
			return classify(err)
		}
		cctx, cancel = e.request(ctx)
		cur, err := e.leases().Get(cctx, e.name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return elector.ErrLeadershipLost
		case err != nil:
			return classify(err)
		case !holderOf(cur).SameTerm(self):
			return elector.ErrLeadershipLost
		}
		h.set(cur)
	}
	return errors.New("the Lease changed twice during one renewal")
}

// release hands the term's Lease over, with an update conditioned on the
// version this Elector holds: to the first live ticket in line (that
// waiter claims it at once, and observers see one leader follow the
// other), or, with nobody in line, by clearing its holder as client-go's
// ReleaseOnCancel does, so that any elector takes it at once. The term's deadline has ended
// before. Transient errors are retried until ctx ends; a Lease that names
// another term, or none, needs nothing.
func (e *Elector) release(ctx context.Context, h *held, self elector.Leader) error {
	return e.releaseTo(ctx, h, self, "")
}

// releaseTo is release that hands the Lease to the newest live ticket of
// candidate to, if not empty (switchover.go); without one, it hands it to
// the first in line and returns a *elector.NotQueuedError.
func (e *Elector) releaseTo(ctx context.Context, h *held, self elector.Leader, to string) error {
	b := e.newBackoff()
	for {
		obj := h.get()
		named := e.handOverOrRelease(obj, self, to)
		cctx, cancel := e.request(ctx)
		_, err := e.leases().Update(cctx, obj, metav1.UpdateOptions{})
		cancel()
		switch {
		case err == nil:
			e.fails.Answered("resign")
			e.log.Info("handed the Lease over", "fencing_token", self.Token, "to", holder(obj))
			if to != "" && !named {
				return &elector.NotQueuedError{ID: to}
			}
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			cctx, cancel := e.request(ctx)
			cur, gerr := e.leases().Get(cctx, e.name, metav1.GetOptions{})
			cancel()
			switch {
			case apierrors.IsNotFound(gerr):
				return nil
			case gerr == nil && !holderOf(cur).SameTerm(self):
				return nil
			case gerr == nil:
				h.set(cur)
				continue
			}
			err = gerr
		}
		err = classify(err)
		e.fails.Failed("resign", err)
		if isPermanent(err) || ctx.Err() != nil {
			return &elector.StoreError{Op: "resign", Err: err, Permanent: isPermanent(err)}
		}
		if !e.sleep(ctx, b.Next()) {
			return &elector.StoreError{Op: "resign", Err: err}
		}
	}
}

// handOverOrRelease makes obj the Lease handed to the first live ticket
// in line other than this candidate's own (the newest live ticket of
// candidate to, if not empty and it has one: then named), or released. The successor's token is one
// more than the highest version or token seen, as in take.
func (e *Elector) handOverOrRelease(obj *coordinationv1.Lease, self elector.Leader, to string) (named bool) {
	now := e.cfg.Clock.Now()
	st, _ := e.view.snapshot()
	st.tickets = slices.DeleteFunc(st.tickets, func(t seen) bool { return holder(t.obj) == self.ID })
	next, _, _ := st.head(now, e.cfg.Timing.RenewInterval)
	if to != "" {
		if t := st.newestOf(to, now, e.cfg.Timing.RenewInterval); t != nil {
			next, named = t, true
		}
	}
	if next == nil {
		release(obj, now)
		return named
	}
	cur, _ := rv(obj.ResourceVersion)
	handOver(obj, next.obj, max(st.maxRV, cur, e.seen.Load())+1, e.cfg.Timing.TTL, now)
	return named
}

// nextRenewal is when the renewal after one made at now is due: one
// renewal interval later, but with an interval under a second, no later
// than just after the next wall-clock second begins. A renewal counts
// only from the first write of a record client-go can tell apart (held,
// renewed), and client-go tells renewTime to the second: so the first
// renewal of each second is the one that extends the deadline, and it
// is sent as early in its second as can be.
func (e *Elector) nextRenewal(now time.Time) time.Time {
	next := now.Add(e.cfg.Timing.RenewInterval)
	if e.cfg.Timing.RenewInterval >= time.Second {
		return next
	}
	second := now.Truncate(time.Second).Add(time.Second + 2*time.Millisecond)
	if second.Before(next) {
		return second
	}
	return next
}
