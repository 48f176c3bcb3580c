package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// TestSwitchoverSplitHandover: three servers; a leads, b and c wait. c is
// cut off from server 0 (it still claims on 1 and 2, a majority, so
// Queued(c) accepts); then, while a stops its child, a loses server 2.
// The leave reaches servers 0 and 1 (a majority: Resign's success): on 0
// c has no entry and the head b is handed token+1, on 1 c is; server 2
// keeps a's lapsing term. Nobody holds a majority, yet ResignTo returns
// nil. The switchover must hand the term to c at once, or not report
// success: here nobody leads until a's lease lapses on server 2, and then
// b, not c, leads.
func TestSwitchoverSplitHandover(t *testing.T) {
	h := newHarness(t, 3)
	el := faultElection(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, pa := h.proxied(t, el, "a")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*faultTTL, "a")
	cb := electortest.Campaign(ctx, h.candidate(t, el, "b"))
	electortest.Eventually(t, 5*time.Second, "b queued on every server", func() bool { return h.queuedOn(t, el) == [3]int{2, 2, 2} })
	c, pc := h.proxied(t, el, "c")
	cc := electortest.Campaign(ctx, c)
	electortest.Eventually(t, 5*time.Second, "c queued on every server", func() bool { return h.queuedOn(t, el) == [3]int{3, 3, 3} })
	pc[0].Cut()
	electortest.Eventually(t, 5*faultTTL, "c's entry gone from server 0", func() bool { return h.queuedOn(t, el) == [3]int{2, 3, 3} })
	if err := ra.Term.Queued(ctx, "c"); err != nil {
		t.Fatalf("Queued(c) = %v, want nil (c claims on servers 1 and 2)", err)
	}
	// a loses server 2 between the check and the hand-over.
	pa[2].Cut()
	start := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	err := ra.Term.ResignTo(rctx, "c")
	t.Logf("ResignTo(c) = %v after %s", err, time.Since(start).Round(time.Millisecond))
	if err != nil {
		var nq *elector.NotQueuedError
		if !errors.As(err, &nq) {
			t.Logf("switchover reported a failure: %v", err)
		}
		return
	}
	select {
	case r := <-cc:
		if r.Err != nil {
			t.Fatalf("c: %v", r.Err)
		}
		t.Logf("c led %s after the switchover", r.At.Sub(start))
		if r.At.Sub(start) > faultTTL/3 {
			t.Fatalf("c led %s after the switchover, want far less than the %s TTL", r.At.Sub(start), faultTTL)
		}
	case r := <-cb:
		if r.Err != nil {
			t.Fatalf("b: %v", r.Err)
		}
		t.Fatalf("switchover to c reported success, yet nobody led for %s, then b (not c) led", r.At.Sub(start).Round(time.Millisecond))
	case <-time.After(5 * faultTTL):
		t.Fatalf("switchover to c reported success, yet nobody led within %s", 5*faultTTL)
	}
}
