package redlock

// Steps of an entry that land after its candidate left every server.

import (
	"context"
	"testing"
	"time"
)

// TestLateJoinAfterCleanup: a join that arrives after the campaign
// that sent it ended (and left every server) queues a dead entry first in
// line; it holds an uncommitted grant until its lease lapses, so the next
// candidate waits about one TTL for nobody.
func TestLateJoinAfterCleanup(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = 2 * time.Second
	election := "late-join"
	a := newElector(t, h.addrs(), election, "a", ttl)
	b := newElector(t, h.addrs(), election, "b", ttl)
	pastEpoch(t, a)

	entryA, ordA := a.core.NewEntry(), order(time.Now())
	a.cleanup(entryA, 0) // A's campaign ended and left ...
	for i := range 3 {   // ... and then its last join lands everywhere
		mustStep(t, a, i, "join", entryA, ordA, 0, time.Time{})
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*ttl)
	defer cancel()
	term, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	t.Logf("B led after %s with no live candidate ahead of it", waited.Round(time.Millisecond))
	_ = term.Resign(context.Background())
	if waited > ttl/2 {
		t.Logf("(low severity) a dead entry delayed the election by %s", waited.Round(time.Millisecond))
	}
}

// TestLateStepAfterLeave: a renewal held by the network that lands after
// its candidate left must not queue the entry again (it would take the
// next handover, and Leader would name it, for up to a lease). A leave is
// recorded for two TTLs, and steps of that entry are refused meanwhile.
func TestLateStepAfterLeave(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	a := newElector(t, h.addrs(), "late-step", "a", ttl)
	pastEpoch(t, a)
	ctx := context.Background()
	entry, ord := a.core.NewEntry(), order(time.Now())
	for i := range 3 {
		mustStep(t, a, i, "join", entry, ord, 0, time.Time{})
	}
	if _, _, err := a.leave(ctx, "leave", entry, 0, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if r := mustStep(t, a, i, "hold", entry, ord, 0, time.Time{}); r.status != "left" {
			t.Fatalf("a late renewal on server %d: status %s, want left", i, r.status)
		}
	}
	if n := h.Queued(t, "late-step"); n != 0 {
		t.Fatalf("the entry that left is queued again on %d", n)
	}
}
