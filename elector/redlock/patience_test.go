package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/electd/electd/elector/electortest"
)

// TestSlowServersAfterReconnect: every server answers in 280 ms, within
// the request timeout (400 ms at TTL 2 s) on an open connection but not
// the two round trips a new one needs (HELLO, then the script). Once every
// connection is reset, a fixed timeout never gets a reply again from any
// server. With patience each server's retry waits longer and gets its
// reply: the leader renews again (or, had its lease lapsed, wins again).
func TestSlowServersAfterReconnect(t *testing.T) {
	h := newHarness(t, 3)
	ctx := context.Background()
	a, ps := h.proxied(t, faultElection(t), "a")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*faultTTL, "a")

	for _, p := range ps {
		p.SetDelay(140 * time.Millisecond)
	}
	slowFrom := time.Now()
	electortest.Eventually(t, 5*faultTTL, "renewals at a 280 ms round trip", func() bool {
		return ra.Term.ValidUntil().After(slowFrom.Add(faultTTL))
	})
	if err := ra.Term.Err(); err != nil {
		t.Fatalf("term ended at a round trip that fits the timeout: %v", err)
	}

	reset := time.Now()
	for _, p := range ps {
		p.Reset() // every connection dies: the next requests dial anew
	}
	electortest.Eventually(t, 15*time.Second, "a renewal after the reset, or the term's end", func() bool {
		return ra.Term.Err() != nil || ra.Term.ValidUntil().After(reset.Add(2*faultTTL))
	})
	if err := ra.Term.Err(); err != nil {
		t.Logf("the term ended after the reset (%v); campaigning again", err)
		ra = electortest.MustLead(t, electortest.Campaign(ctx, a), 15*time.Second, "a, after the reset")
	} else {
		t.Logf("the term outlived the reset: valid until %s after it", ra.Term.ValidUntil().Sub(reset).Round(time.Millisecond))
	}
	electortest.Resign(t, ra.Term)
}
