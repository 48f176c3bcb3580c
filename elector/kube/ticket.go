package kube

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A candidate's ticket: its place in line, created when it joins, renewed
// while it waits, removed when it leaves or by the waiter behind it once
// nobody renews it.

// ticket is a candidate's place in line: a Lease of its own, labelled
// with the election, renewed while it waits.
type ticket struct {
	name  string
	lease *coordinationv1.Lease // as last written
}

// join creates a ticket, retrying transient errors until ctx ends. A
// retry creates the same name: a create whose answer was lost (a
// timeout) may have been made, and a ticket of ours that nobody renews
// would stand in line, ahead of those who came later, until it is
// removed as dead. The name taken is adopted.
func (e *Elector) join(ctx context.Context) (*ticket, error) {
	b := e.newBackoff()
	name := e.ticketName()
	for {
		id := e.cfg.ID
		now := metav1.NewMicroTime(e.cfg.Clock.Now())
		obj := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.cfg.Namespace, Labels: map[string]string{labelQueue: e.name}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &id, LeaseDurationSeconds: seconds(e.cfg.Timing.TTL), AcquireTime: &now, RenewTime: &now},
		}
		cctx, cancel := e.request(ctx)
		got, err := e.leases().Create(cctx, obj, metav1.CreateOptions{})
		cancel()
		if err == nil {
			e.fails.Answered("join")
			return &ticket{name: name, lease: got}, nil
		}
		if apierrors.IsAlreadyExists(err) {
			var t *ticket
			if t, err = e.adopt(ctx, name); t != nil {
				e.fails.Answered("join")
				return t, nil
			}
			if errors.Is(err, errTicketTaken) {
				name = e.ticketName()
				continue
			}
		}
		err = classify(err)
		e.fails.Failed("join", err)
		if isPermanent(err) || ctx.Err() != nil {
			return nil, err
		}
		if !e.sleep(ctx, b.Next()) {
			return nil, ctx.Err()
		}
	}
}

// errTicketTaken: a ticket's name is another candidate's.
var errTicketTaken = errors.New("the ticket's name is another candidate's")

// ticketName is a new ticket's name: the election's prefix and 48 random
// bits.
func (e *Elector) ticketName() string {
	var r [6]byte
	_, _ = crand.Read(r[:])
	return ticketPrefix(e.name) + hex.EncodeToString(r[:])
}

// adopt reads the ticket name, which a create found taken: an earlier try
// of join made it if it holds this candidate's identity in this
// election's line; errTicketTaken if it does not. A ticket gone
// meanwhile (removed as dead) is an error: the create is tried again.
func (e *Elector) adopt(ctx context.Context, name string) (*ticket, error) {
	cctx, cancel := e.request(ctx)
	defer cancel()
	got, err := e.leases().Get(cctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read ticket %s, which a create found taken: %w", name, err)
	}
	if got.Labels[labelQueue] != e.name || got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != e.cfg.ID {
		return nil, errTicketTaken
	}
	e.log.Debug("adopted the ticket a create whose answer was lost made", "ticket", name)
	return &ticket{name: name, lease: got}, nil
}

// ticketInterval is how often a waiter renews its ticket: a third of the
// ticket's duration (one TTL), so that two renewals may fail before the
// line counts it dead.
func (e *Elector) ticketInterval() time.Duration { return e.cfg.Timing.TTL / 3 }

// keepTicket renews t until ctx ends; the first renewal writes the
// ticket's place in line (its creation's resourceVersion). It closes lost
// if the ticket was removed.
func (e *Elector) keepTicket(ctx context.Context, t *ticket, lost chan<- struct{}) {
	first, again := true, true
	b := e.newBackoff()
	for {
		if !again && !e.sleep(ctx, e.ticketInterval()) {
			return
		}
		again = false
		obj := t.lease.DeepCopy()
		if first {
			if obj.Annotations == nil {
				obj.Annotations = map[string]string{}
			}
			obj.Annotations[annOrder] = t.lease.ResourceVersion
		}
		renew(obj, e.cfg.Timing.TTL, e.cfg.Clock.Now())
		cctx, cancel := e.request(ctx)
		got, err := e.leases().Update(cctx, obj, metav1.UpdateOptions{})
		cancel()
		switch {
		case err == nil:
			t.lease, first = got, false
			b.Reset()
			e.fails.Answered("queue")
			continue
		case apierrors.IsNotFound(err):
			close(lost)
			return
		case apierrors.IsConflict(err):
			cur, gerr := e.leases().Get(ctx, t.name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) {
				close(lost)
				return
			}
			if gerr == nil {
				t.lease, again = cur, true
				continue
			}
			err = gerr
		}
		if ctx.Err() != nil {
			return
		}
		e.fails.Failed("queue", classify(err), "ticket", t.name)
		if !e.sleep(ctx, b.Next()) {
			return
		}
		again = true
	}
}

// leave removes a ticket, within a short bound.
func (e *Elector) leave(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), e.cleanupTimeout())
	defer cancel()
	err := e.leases().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.log.Debug("could not remove the ticket; the line drops it once it is no longer renewed", "ticket", name, "err", err)
	}
}

// removeDead removes the tickets ahead of this one whose owners stopped
// renewing them, each only if it is still the version seen.
func (e *Elector) removeDead(ctx context.Context, dead []seen) {
	for _, t := range dead {
		v := t.obj.ResourceVersion
		cctx, cancel := e.request(ctx)
		err := e.leases().Delete(cctx, t.obj.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &v}})
		cancel()
		switch {
		case err == nil:
			e.log.Info("removed the ticket of a waiter that stopped renewing it", "ticket", t.obj.Name, "holder", holder(t.obj))
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			e.log.Debug("could not remove a dead ticket", "ticket", t.obj.Name, "err", err)
		}
	}
}
