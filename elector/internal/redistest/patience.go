package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
)

// Slow is one run of SlowAfterReconnect: a candidate of a lease of TTL
// that reaches its store (every server of it) through Proxies.
type Slow struct {
	Candidate elector.Elector
	Proxies   []*faultproxy.Proxy
	TTL       time.Duration
	// Delay is what each proxy adds each way: the round trip (2 Delay)
	// fits the request timeout on an open connection, but not the two
	// round trips a new one needs (HELLO, then the script).
	Delay time.Duration
	// AfterReset bounds the wait, after every connection is reset, for a
	// renewal (or the term's end), and then for a new term.
	AfterReset time.Duration
}

// SlowAfterReconnect is the scenario of patience: the candidate leads
// (within 5 TTLs); its store slows down to a round trip of 2 Delay, and
// the leader must still renew (within 5 TTLs). Then every connection is
// reset, so that each request must dial anew. A fixed timeout never gets
// a reply again: each request times out, which closes its connection, so
// the next one starts over. With patience a retry waits longer and gets
// its reply: within AfterReset the leader renews again (or, had its lease
// lapsed meanwhile, wins again within AfterReset).
func SlowAfterReconnect(t *testing.T, s Slow) {
	t.Helper()
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, s.Candidate), 5*s.TTL, "a")

	for _, p := range s.Proxies {
		p.SetDelay(s.Delay)
	}
	slowFrom := time.Now()
	electortest.Eventually(t, 5*s.TTL, fmt.Sprintf("renewals at a %d ms round trip", (2*s.Delay).Milliseconds()), func() bool {
		return ra.Term.ValidUntil().After(slowFrom.Add(s.TTL))
	})
	if err := ra.Term.Err(); err != nil {
		t.Fatalf("term ended at a round trip that fits the timeout: %v", err)
	}

	reset := time.Now()
	for _, p := range s.Proxies {
		p.Reset() // every connection dies: the next requests dial anew
	}
	electortest.Eventually(t, s.AfterReset, "a renewal after the reset, or the term's end", func() bool {
		return ra.Term.Err() != nil || ra.Term.ValidUntil().After(reset.Add(2*s.TTL))
	})
	if err := ra.Term.Err(); err != nil {
		t.Logf("the term ended after the reset (%v); campaigning again", err)
		ra = electortest.MustLead(t, electortest.Campaign(ctx, s.Candidate), s.AfterReset, "a, after the reset")
	} else {
		t.Logf("the term outlived the reset: valid until %s after it", ra.Term.ValidUntil().Sub(reset).Round(time.Millisecond))
	}
	electortest.Resign(t, ra.Term)
}
