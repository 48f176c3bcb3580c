package redis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/internal/rediskit"
	"github.com/electd/electd/internal/faultproxy"
)

// TestSlowStoreAfterReconnect: a store whose round trip (140 ms) fits the
// request timeout (200 ms at TTL 1 s) on an open connection, but not the
// two round trips a new connection needs (HELLO, then the script). Once
// every connection is reset, a fixed timeout never gets a reply again:
// each request times out, which closes its connection, so the next one
// starts over. With patience the retry waits longer, gets its reply, and
// the connection it made serves the renewals after it: the leader renews
// again (or, had its lease lapsed meanwhile, wins again).
func TestSlowStoreAfterReconnect(t *testing.T) {
	srv, _ := startRedis(t)
	p := faultproxy.Start(t, srv.Addr())
	cli := redis.NewClient(rediskit.ClientOptions(p.Addr()))
	t.Cleanup(func() { _ = cli.Close() })
	ctx := context.Background()
	a := newElectorWith(t, Config{Client: cli, Candidate: elector.Candidate{
		Election: "slow", ID: "a", Timing: testTiming()}})
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")

	p.SetDelay(70 * time.Millisecond)
	slowFrom := time.Now()
	electortest.Eventually(t, 5*testTTL, "renewals at a 140 ms round trip", func() bool {
		return ra.Term.ValidUntil().After(slowFrom.Add(testTTL))
	})
	if err := ra.Term.Err(); err != nil {
		t.Fatalf("term ended at a round trip that fits the timeout: %v", err)
	}

	reset := time.Now()
	p.Reset() // every connection dies: the next request dials anew
	electortest.Eventually(t, 10*time.Second, "a renewal after the reset, or the term's end", func() bool {
		return ra.Term.Err() != nil || ra.Term.ValidUntil().After(reset.Add(2*testTTL))
	})
	if err := ra.Term.Err(); err != nil {
		t.Logf("the term ended after the reset (%v); campaigning again", err)
		r := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a, after the reset")
		ra = r
	} else {
		t.Logf("the term outlived the reset: valid until %s after it", ra.Term.ValidUntil().Sub(reset).Round(time.Millisecond))
	}
	electortest.Resign(t, ra.Term)
}
