package electortest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// testSwitchover: with a leading, b and c queued, a switchover to c makes
// c the next leader with a greater token while b stays queued, and b leads
// after c; one to a candidate that is not queued is refused while a's term
// holds. The observer proves b did not lead in between, even for a moment.
func testSwitchover(t *testing.T, h Harness) {
	el := uniqueElection(t)
	const ttl = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := candidate(t, h, el, "a", ttl)
	sw, ok := a.(elector.Switcher)
	if !ok {
		t.Skipf("%T does not implement elector.Switcher: switchover is not supported", a)
	}
	o := observe(ctx, candidate(t, h, el, "watcher", ttl))
	Eventually(t, 5*time.Second, "initial 'no leader'", func() bool { _, ok := o.last(); return ok })

	ra := MustLead(t, Campaign(ctx, a), 10*time.Second, "a")
	o.awaitLast(t, 5*time.Second, "a's term observed", ra.Term.Leader.SameTerm)
	cb := Campaign(ctx, candidate(t, h, el, "b", ttl))
	waitQueued(t, h, el, 2)
	cc := Campaign(ctx, candidate(t, h, el, "c", ttl))
	waitQueued(t, h, el, 3)

	for _, tc := range []struct {
		name string
		id   string
	}{
		{name: "unknown candidate", id: "d"},
		{name: "the leader itself", id: "a"},
	} {
		err := sw.Queued(ctx, tc.id)
		if nq := (*elector.NotQueuedError)(nil); !errors.As(err, &nq) || nq.ID != tc.id {
			t.Fatalf("%s: Queued(%q) = %v, want a *NotQueuedError naming it", tc.name, tc.id, err)
		}
	}
	if err := ra.Term.Queued(ctx, "c"); err != nil {
		t.Fatalf("Queued(c) = %v, want nil", err)
	}
	if err := ra.Term.Err(); err != nil {
		t.Fatalf("a's term ended after the refused switchovers: %v", err)
	}
	StillWaiting(t, cb, "b")
	StillWaiting(t, cc, "c")

	start := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	if err := ra.Term.ResignTo(rctx, "c"); err != nil {
		t.Fatalf("switchover to c: %v", err)
	}
	if !errors.Is(ra.Term.Err(), elector.ErrResigned) {
		t.Fatalf("after the switchover a's term.Err() = %v, want ErrResigned", ra.Term.Err())
	}
	rc := MustLead(t, cc, ttl, "c")
	handedOver(t, "switchover a -> c", start, ttl, ra, rc)
	o.awaitLast(t, 5*time.Second, "c's term observed", rc.Term.Leader.SameTerm)
	StillWaiting(t, cb, "b")
	waitQueued(t, h, el, 2) // b still queued (with a new key where the store orders by creation)
	Resign(t, rc.Term)
	rb := MustLead(t, cb, ttl, "b")
	if rb.Term.Token <= rc.Term.Token {
		t.Fatalf("b's token %d after c's %d", rb.Term.Token, rc.Term.Token)
	}
	o.awaitLast(t, 5*time.Second, "b's term observed", rb.Term.Leader.SameTerm)
	Resign(t, rb.Term)

	terms := []elector.Leader{ra.Term.Leader, rc.Term.Leader, rb.Term.Leader}
	for end := time.Now().Add(5 * time.Second); ; {
		err := checkObserved(o.values(), terms)
		if err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("observed %v, want a, c, b in turn: %v", o, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the observer's record, not synchronising
	}
	t.Logf("observed %v", o)
}

// testSwitchoverTargetGone: a leads, b and c queued; Queued(c) accepts the
// switchover, then c leaves the queue before the hand-over runs (the race
// the supervisor has while it stops the child). elector.Term.ResignTo's
// contract: the term goes to the next in line and a *NotQueuedError is
// returned, for the switchover did not happen. b must lead.
func testSwitchoverTargetGone(t *testing.T, h Harness) {
	el := uniqueElection(t)
	const ttl = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ra, cb := switcherLeadsBQueued(ctx, t, h, el, ttl)
	cctx, ccancel := context.WithCancel(ctx)
	cc := Campaign(cctx, candidate(t, h, el, "c", ttl))
	waitQueued(t, h, el, 3)
	if err := ra.Term.Queued(ctx, "c"); err != nil {
		t.Fatalf("Queued(c) = %v, want nil", err)
	}
	// c leaves (its campaign ends and removes its entry) after the check.
	ccancel()
	if r := <-cc; r.Err == nil {
		t.Fatalf("c led while a leads")
	}
	waitQueued(t, h, el, 2)
	Eventually(t, 5*time.Second, "Queued(c) to see c gone", func() bool {
		var nq *elector.NotQueuedError
		return errors.As(ra.Term.Queued(ctx, "c"), &nq)
	})
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	err := ra.Term.ResignTo(rctx, "c")
	rb := MustLead(t, cb, ttl, "b")
	defer Resign(t, rb.Term)
	var nq *elector.NotQueuedError
	if !errors.As(err, &nq) || nq.ID != "c" {
		t.Fatalf("switchover to c, which had left: ResignTo = %v, want a *NotQueuedError naming c (b leads, token %d: the switchover did not happen, yet it reports success)", err, rb.Term.Token)
	}
}

// testSwitchoverToRestartedCandidate: c's copy crashed (cut off from the
// store, its entry or ticket left behind, still live for up to one TTL)
// and came back under the same ID, queued again; the operator hands over
// to c, which Queued accepts. The hand-over must go to the c that waits,
// within a fraction of the TTL (as testSwitchover), or be refused: it must
// not go to the dead copy's entry, reported as a success, leaving the
// election with no leader until that entry lapses (then b, not c, leads).
func testSwitchoverToRestartedCandidate(t *testing.T, h Harness) {
	el := uniqueElection(t)
	const ttl = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ra, cb := switcherLeadsBQueued(ctx, t, h, el, ttl)
	// c's first copy queues, then crashes: cut off, it never leaves.
	c1, link := proxied(t, h, el, "c", ttl)
	c1ctx, c1cancel := context.WithCancel(ctx)
	defer c1cancel()
	cc1 := Campaign(c1ctx, c1)
	waitQueued(t, h, el, 3)
	link.Cut()
	crashed := time.Now()
	c1cancel()
	if r := <-cc1; r.Term != nil {
		t.Fatalf("the first copy of c led while a leads")
	}
	// c comes back (same ID) and queues again.
	cc2 := Campaign(ctx, candidate(t, h, el, "c", ttl))
	waitQueued(t, h, el, 4)
	if err := ra.Term.Queued(ctx, "c"); err != nil {
		t.Fatalf("Queued(c) = %v, want nil", err)
	}
	if since := time.Since(crashed); since > ttl/2 {
		t.Skipf("set-up took %s, too close to the dead copy's TTL", since)
	}
	start := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	err := ra.Term.ResignTo(rctx, "c")
	var nq *elector.NotQueuedError
	if errors.As(err, &nq) {
		t.Logf("switchover refused after the term ended: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("switchover to c: %v", err)
	}
	select {
	case r := <-cc2:
		if r.Err != nil {
			t.Fatalf("c: campaign: %v", r.Err)
		}
		t.Logf("c led %s after the switchover", r.At.Sub(start))
		defer Resign(t, r.Term)
		if r.At.Sub(start) > ttl/3 {
			t.Fatalf("c led %s after the switchover, want far less than the %s TTL", r.At.Sub(start), ttl)
		}
		return
	case r := <-cb:
		if r.Err != nil {
			t.Fatalf("b: campaign: %v", r.Err)
		}
		defer Resign(t, r.Term)
		t.Fatalf("switchover to c reported success, yet b (not the target c, which stayed queued) led, %s after it: the term went to the dead copy's entry and nobody led meanwhile", r.At.Sub(start).Round(time.Millisecond))
	case <-time.After(3 * ttl):
		t.Fatalf("switchover to c reported success, yet nobody led within %s", 3*ttl)
	}
}

// switcherLeadsBQueued makes candidate a lead election el and then queues
// b behind it, both with a lease of ttl; the test is skipped if a is not
// an elector.Switcher.
func switcherLeadsBQueued(ctx context.Context, t *testing.T, h Harness, el string, ttl time.Duration) (Result, <-chan Result) {
	t.Helper()
	a := candidate(t, h, el, "a", ttl)
	if _, ok := a.(elector.Switcher); !ok {
		t.Skipf("%T does not implement elector.Switcher", a)
	}
	ra := MustLead(t, Campaign(ctx, a), 10*time.Second, "a")
	cb := Campaign(ctx, candidate(t, h, el, "b", ttl))
	waitQueued(t, h, el, 2)
	return ra, cb
}

// handedOver fails the test unless next led well under ttl after start,
// when the term was handed over (by the hand-over, not by prev's lease
// expiring), with a token greater than prev's; what names the hand-over.
func handedOver(t *testing.T, what string, start time.Time, ttl time.Duration, prev, next Result) {
	t.Helper()
	if gap := next.At.Sub(start); gap > ttl/3 {
		t.Fatalf("%s took %s, want far less than the %s TTL", what, gap, ttl)
	} else {
		t.Logf("%s: %s", what, gap)
	}
	if next.Term.Token <= prev.Term.Token {
		t.Fatalf("%s's token %d after %s's %d", next.Term.Leader.ID, next.Term.Token, prev.Term.Leader.ID, prev.Term.Token)
	}
}
