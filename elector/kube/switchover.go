package kube

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/electd/electd/elector"
)

var _ elector.Switcher = (*Elector)(nil)

// A switchover is the resignation's one conditioned update of the Lease
// (release), naming the named candidate's newest live ticket instead of
// the first in line: that candidate claims it at once (candidacy: a Lease
// handed to its ticket). Newest, for an older live ticket with that ID is
// a previous copy's, crashed, that lapses: it is passed like any other. The waiters ahead of it keep their tickets and their places,
// and time the new holder's Lease as any other; the first of them is
// handed the Lease when it resigns.

// Queued reports whether a live ticket of a candidate with this ID, not
// the Lease's holder, waits in line. It lists the tickets, so that one
// created a moment ago counts; one the view has seen stand unrenewed past
// its duration is dead and does not.
func (e *Elector) Queued(ctx context.Context, id string) error {
	cctx, cancel := e.request(ctx)
	defer cancel()
	list, err := e.leases().List(cctx, metav1.ListOptions{LabelSelector: labels.Set{labelQueue: e.name}.String()})
	if err != nil {
		err = classify(err)
		return &elector.StoreError{Op: "switchover", Err: fmt.Errorf("list the line: %w", err), Permanent: isPermanent(err)}
	}
	st, _ := e.view.snapshot()
	lead := ""
	if st.lease != nil {
		lead = holder(st.lease.obj)
	}
	now := e.cfg.Clock.Now()
	for i := range list.Items {
		t := &list.Items[i]
		if holder(t) != id || id == lead {
			continue
		}
		i := slices.IndexFunc(st.tickets, func(s seen) bool { return s.obj.Name == t.Name && s.obj.ResourceVersion == t.ResourceVersion })
		if i >= 0 && !now.Before(st.tickets[i].at.Add(duration(t)+e.cfg.Timing.RenewInterval)) {
			continue // seen standing unrenewed past its duration: dead
		}
		return nil
	}
	return &elector.NotQueuedError{ID: id}
}

// newestOf is the live ticket of candidate id that arrived last (latest in
// line), or nil: a ticket is live as in head.
func (st state) newestOf(id string, now time.Time, grace time.Duration) *seen {
	line := slices.Clone(st.tickets)
	sortLine(line)
	for i := len(line) - 1; i >= 0; i-- {
		t := &line[i]
		if holder(t.obj) == id && now.Before(t.at.Add(duration(t.obj)+grace)) {
			return t
		}
	}
	return nil
}
