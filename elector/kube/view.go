package kube

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/electd/electd/internal/backoff"
)

// view is what this Elector knows of its election's Leases: the election's
// own Lease and the tickets of its waiting candidates, each with the local
// time at which its current resourceVersion was first seen. Two watches
// keep it (one on the Lease by name, one on the tickets by label), each
// resumed from its last resourceVersion; nothing polls. Every change
// closes the channel changed returned, so waiters select on it.
type view struct {
	e *Elector

	mu      sync.Mutex
	lease   *seen            // nil: no Lease (or not listed yet)
	tickets map[string]*seen // by name
	synced  [2]bool          // the Lease's and the tickets' first lists are in
	maxRV   uint64           // the highest resourceVersion seen, of a Lease or a list
	goneRV  uint64           // the version at which the Lease was last seen gone (a deletion, or a list without it)
	// gone, while there is no Lease, is when its deletion was seen and
	// how long its last holder may still hold it (nil: no holder seen).
	gone    *seen
	changed chan struct{}
	started bool
	ready   chan struct{} // closed once both lists are in
}

// seen is a Lease as observed, and when its resourceVersion was first seen
// here, on the Elector's clock (whose readings carry the monotonic clock).
type seen struct {
	obj *coordinationv1.Lease
	rv  uint64
	at  time.Time
	// dur is how long the version must stand before the Lease is free:
	// its own duration, or more (see keep and gone).
	dur time.Duration
}

func newView(e *Elector) *view {
	return &view{e: e, tickets: map[string]*seen{}, changed: make(chan struct{}), ready: make(chan struct{})}
}

// start runs the two watches, once; Close stops them.
func (v *view) start() {
	v.mu.Lock()
	if v.started {
		v.mu.Unlock()
		return
	}
	v.started = true
	v.mu.Unlock()
	name := v.e.name
	v.e.life.Go(func() {
		v.watch("watch", 0, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	})
	v.e.life.Go(v.e.publish)
	v.e.life.Go(func() {
		v.watch("watch-queue", 1, metav1.ListOptions{LabelSelector: labels.Set{labelQueue: name}.String()})
	})
}

// wait blocks until both lists are in, or ctx ends.
func (v *view) wait(ctx context.Context) error {
	select {
	case <-v.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// snapshot returns the state and the channel closed at its next change.
func (v *view) snapshot() (state, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	st := state{maxRV: v.maxRV, goneRV: v.goneRV}
	if v.gone != nil {
		g := *v.gone
		st.gone = &g
	}
	if v.lease != nil {
		c := *v.lease
		st.lease = &c
	}
	for _, t := range v.tickets {
		st.tickets = append(st.tickets, *t)
	}
	return st, v.changed
}

// watch lists the Leases opts selects, then watches them from the list's
// resourceVersion, and again from the last one seen when the watch ends;
// it lists again when that version is too old (410 Gone). which is 0 for
// the Lease, 1 for the tickets.
func (v *view) watch(op string, which int, opts metav1.ListOptions) {
	e := v.e
	leases := e.leases()
	b := e.newBackoff()
	from := ""
	for e.ctx.Err() == nil {
		if from == "" {
			list, err := leases.List(e.ctx, opts)
			if err != nil {
				if !v.failed(op, err, b) {
					return
				}
				continue
			}
			e.fails.Answered(op)
			v.replace(which, list.Items, list.ResourceVersion)
			from = list.ResourceVersion
		}
		wo := opts
		wo.ResourceVersion, wo.AllowWatchBookmarks = from, true
		w, err := leases.Watch(e.ctx, wo)
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			from = "" // too old to resume from: list again
			continue
		}
		if err != nil {
			if !v.failed(op, err, b) {
				return
			}
			continue
		}
		from = v.drain(op, which, w, from, b)
		w.Stop()
	}
}

// failed counts err as a failure of op, unless the view is closed (then
// it is not a store failure), and waits out b's next delay; false once
// the view is closed.
func (v *view) failed(op string, err error, b *backoff.Backoff) bool {
	e := v.e
	if e.ctx.Err() != nil {
		return false
	}
	e.fails.Failed(op, classify(err))
	return e.sleep(e.ctx, b.Next())
}

// drain applies w's events until it ends; it returns the resourceVersion
// to watch from next ("" to list again).
func (v *view) drain(op string, which int, w watch.Interface, from string, b *backoff.Backoff) string {
	e := v.e
	for {
		select {
		case <-e.ctx.Done():
			return from
		case ev, ok := <-w.ResultChan():
			if !ok {
				return from
			}
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return ""
				}
				e.fails.Failed(op, classify(err))
				e.sleep(e.ctx, b.Next())
				return from
			case watch.Bookmark:
				if l, ok := ev.Object.(*coordinationv1.Lease); ok {
					v.sawRV(l.ResourceVersion)
					from = l.ResourceVersion
				}
			case watch.Added, watch.Modified, watch.Deleted:
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok {
					continue
				}
				b.Reset()
				e.fails.Answered(op)
				v.apply(which, l, ev.Type == watch.Deleted)
				from = l.ResourceVersion
			}
		}
	}
}

// replace installs a list's items.
func (v *view) replace(which int, items []coordinationv1.Lease, listRV string) {
	now := v.e.cfg.Clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.raise(listRV)
	if which == 0 {
		var next *seen
		for i := range items {
			if items[i].Name == v.e.name {
				next = v.keep(v.lease, &items[i], now)
			}
		}
		if next == nil {
			v.goneRV, _ = strconv.ParseUint(listRV, 10, 64)
			v.vanish(now)
		}
		v.lease = next
	} else {
		tickets := make(map[string]*seen, len(items))
		for i := range items {
			tickets[items[i].Name] = v.keep(v.tickets[items[i].Name], &items[i], now)
		}
		v.tickets = tickets
	}
	if !v.synced[which] {
		v.synced[which] = true
		if v.synced[0] && v.synced[1] {
			close(v.ready)
		}
	}
	v.notify()
}

// apply installs one event's Lease.
func (v *view) apply(which int, l *coordinationv1.Lease, deleted bool) {
	now := v.e.cfg.Clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.raise(l.ResourceVersion)
	switch {
	case which == 0 && deleted:
		v.goneRV, _ = strconv.ParseUint(l.ResourceVersion, 10, 64)
		v.vanish(now)
		v.lease = nil
	case which == 0:
		v.lease = v.keep(v.lease, l, now)
	case deleted:
		delete(v.tickets, l.Name)
	default:
		v.tickets[l.Name] = v.keep(v.tickets[l.Name], l, now)
	}
	v.notify()
}

// keep returns the observation of l: old's, if l is the version old saw
// (its first sighting is what counts), else observe's at now.
func (v *view) keep(old *seen, l *coordinationv1.Lease, now time.Time) *seen {
	n, _ := strconv.ParseUint(l.ResourceVersion, 10, 64)
	if old != nil && old.rv == n {
		old.obj = l
		return old
	}
	s := observe(old, v.gone, l, n, now)
	if old == nil {
		v.gone = nil
	}
	return s
}

// observe is a new version l (at rv, first seen at now) of the Lease old
// was (nil: none, and gone, if not nil, was its deletion). How long it
// must stand before the Lease is free:
//   - a holder's version: its duration, or the longer one the same term
//     was seen with (a hand edit that shortens it is not believed);
//   - an empty Lease that electd released (lease.go, released): none;
//   - an empty Lease cleared or recreated by anyone else: the last
//     holder's duration, since that holder, cut off, may not know (none
//     when no holder was seen).
func observe(old, gone *seen, l *coordinationv1.Lease, rv uint64, now time.Time) *seen {
	s := &seen{obj: l, rv: rv, at: now, dur: duration(l)}
	switch {
	case holder(l) != "":
		if old != nil && holderOf(l).SameTerm(holderOf(old.obj)) {
			s.dur = max(s.dur, old.dur)
		}
	case released(l):
		s.dur = 0
	case old != nil:
		s.dur = old.dur
	case gone != nil:
		s.dur = gone.dur
	default:
		s.dur = 0
	}
	return s
}

// vanish records that the Lease is gone, at now: the last holder the
// view saw may hold it for the duration it was seen with. v.mu held.
func (v *view) vanish(now time.Time) {
	switch {
	case v.lease == nil:
		// still gone (or never seen): the first sighting counts
	case v.lease.dur > 0:
		v.gone = &seen{at: now, dur: v.lease.dur}
	default:
		v.gone = nil
	}
}

func (v *view) sawRV(s string) {
	v.mu.Lock()
	v.raise(s)
	v.mu.Unlock()
}

// raise lifts maxRV to s; v.mu held.
func (v *view) raise(s string) {
	if n, err := strconv.ParseUint(s, 10, 64); err == nil && n > v.maxRV {
		v.maxRV = n
	}
}

// notify wakes every waiter; v.mu held.
func (v *view) notify() {
	close(v.changed)
	v.changed = make(chan struct{})
}

// state is a snapshot of the view.
type state struct {
	lease   *seen
	tickets []seen
	maxRV   uint64
	goneRV  uint64
	gone    *seen
}

// free reports whether the Lease may be taken at now, and when it will
// be unless it changes (zero: it is free now). A Lease may be taken
// once its version has stood unchanged, since this Elector first saw it,
// for its duration on this host's clock (seen.dur: the longest the same
// term was seen with); at once when electd's own release cleared it
// (lease.go, released) or when no holder was ever seen; and a Lease
// deleted, or cleared by anyone else, only once its last holder's
// duration has passed since that was seen (the holder, cut off, may not
// know).
func (st state) free(now time.Time) (ok bool, at time.Time) {
	switch l := st.lease; {
	case l == nil && st.gone == nil:
		return true, time.Time{}
	case l == nil:
		at = st.gone.at.Add(st.gone.dur)
	case holder(l.obj) == "" && l.dur == 0:
		return true, time.Time{}
	case st.handedToNobody():
		return true, time.Time{}
	default:
		at = l.at.Add(l.dur)
	}
	return !now.Before(at), at
}

// handedToNobody reports whether the Lease is a hand-over (lease.go,
// handOver) to a ticket that is gone: its owner left the line (it was
// stopping too, as in a rolling update) and will never claim it. The
// hand-over ended the old term before it was written, and the named
// candidate's term begins only with its claim, conditioned on this very
// version: so whoever takes it instead, by an update conditioned on it,
// is the only one. Without this the Lease would wait a whole duration.
func (st state) handedToNobody() bool {
	to, ok := st.lease.obj.Annotations[annHandover]
	if !ok || holderOf(st.lease.obj).Token == 0 {
		return false
	}
	for _, t := range st.tickets {
		if t.obj.Name == to {
			return false
		}
	}
	return true
}

// head is the first live ticket in line, and when the next ticket ahead of
// the live ones will count as dead (zero: none pending). A ticket is dead
// once it stood unchanged for its duration plus one renewal interval: its
// owner stopped renewing it.
func (st state) head(now time.Time, grace time.Duration) (h *seen, dead []seen, next time.Time) {
	line := slices.Clone(st.tickets)
	sortLine(line)
	for i := range line {
		t := &line[i]
		until := t.at.Add(duration(t.obj) + grace)
		if now.Before(until) {
			if next.IsZero() || until.Before(next) {
				next = until
			}
			return t, dead, next
		}
		dead = append(dead, *t)
	}
	return nil, dead, time.Time{}
}

// sortLine sorts tickets in line: by order, then by name.
func sortLine(line []seen) {
	slices.SortFunc(line, func(a, b seen) int {
		if c := cmp.Compare(order(a), order(b)); c != 0 {
			return c
		}
		return cmp.Compare(a.obj.Name, b.obj.Name)
	})
}

// order is a ticket's place in line: the resourceVersion of its creation,
// which its owner writes into annOrder with its first renewal; until then
// its resourceVersion is still that of its creation.
func order(t seen) uint64 {
	if s, ok := t.obj.Annotations[annOrder]; ok {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return n
		}
	}
	return t.rv
}
