package kube

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/electd/electd/elector"
)

var _ elector.Queuer = (*Elector)(nil)

// Queue reads the election's Lease and its tickets (two reads: a get by
// name and a list by label; the API server has no request for both). The
// Lease's holder comes first (Order 0: its ticket is gone), with its
// token, acquireTime and the end of its duration from its renewTime (by
// the holder's clock: the API server expires nothing, so a holder that
// stopped renewing is still named, with an expiry in the past). The
// waiters follow in line (sortLine), each with its ticket's creation
// time; a waiter has no token before it leads. No semaphores: Slots is 1.
func (e *Elector) Queue(ctx context.Context) (elector.Queue, error) {
	fail := func(err error) (elector.Queue, error) {
		err = classify(err)
		return elector.Queue{}, &elector.StoreError{Op: "status", Err: err, Permanent: isPermanent(err)}
	}
	rctx, cancel := e.request(ctx)
	defer cancel()
	lease, err := e.leases().Get(rctx, e.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		return fail(err)
	}
	list, err := e.leases().List(rctx, metav1.ListOptions{LabelSelector: labels.Set{labelQueue: e.name}.String()})
	if err != nil {
		return fail(err)
	}
	q := elector.Queue{Slots: 1}
	h := holderOf(lease)
	if !h.IsZero() {
		c := elector.Queued{ID: h.ID, Address: h.Address, Holder: true, Token: h.Token, Since: h.Since}
		if lease.Spec.RenewTime != nil {
			c.Expires = lease.Spec.RenewTime.Add(duration(lease))
		}
		q.Candidates = append(q.Candidates, c)
	}
	line := make([]seen, 0, len(list.Items))
	for i := range list.Items {
		t := &list.Items[i]
		if !h.IsZero() && (holder(t) == h.ID || t.Name == lease.Annotations[annHandover]) {
			continue // the holder's own ticket, about to go
		}
		n, err := rv(t.ResourceVersion)
		if err != nil {
			return fail(&permanentError{err})
		}
		line = append(line, seen{obj: t, rv: n})
	}
	sortLine(line)
	for _, t := range line {
		q.Candidates = append(q.Candidates, waiter(t))
	}
	return q, nil
}

// waiter is a ticket as a queued candidate.
func waiter(t seen) elector.Queued {
	c := elector.Queued{ID: holder(t.obj), Order: order(t), Arrived: t.obj.CreationTimestamp.Time}
	if r := t.obj.Spec.RenewTime; r != nil {
		c.Expires = r.Add(duration(t.obj))
	}
	return c
}
