package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// TestFailedClaimKeepsPlace: the successor's claim fails (its link to the
// store is slower than the request timeout when its predecessor resigns),
// its session still holding. It keeps its place: once the store answers it
// in time it leads, ahead of the candidate queued behind it. (Seen on the
// three-member cluster under load: a successor whose claim timed out
// requeued last and woke the next, which could do the same.)
func TestFailedClaimKeepsPlace(t *testing.T) {
	const ttl = 5 * time.Second // renewals every 1 s, each request's timeout
	srv := testenv.StartEtcd(t)
	h := &harness{srv: srv}
	p := faultproxy.Start(t, srv.Endpoint())
	errs := &storeErrors{}
	mk := func(id, addr string, inst elector.Instrument) elector.Elector {
		return h.New(t, electortest.Candidate{StoreAddr: addr, Candidate: elector.Candidate{
			Election: "claim", ID: id, Timing: timingOf(ttl), Instrument: inst}})
	}
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, mk("a", srv.Endpoint(), nil)), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, mk("b", p.Addr(), errs))
	electortest.Eventually(t, 5*time.Second, "b queued", func() bool { return h.Queued(t, "claim") == 2 })
	cc := electortest.Campaign(ctx, mk("c", srv.Endpoint(), nil))
	electortest.Eventually(t, 5*time.Second, "c queued", func() bool { return h.Queued(t, "claim") == 3 })

	p.SetDelay(600 * time.Millisecond) // a round trip of b's: 1.2 s
	electortest.Resign(t, ra.Term)
	electortest.Eventually(t, 5*time.Second, "b's claim to fail", func() bool { return errs.count("campaign") > 0 })
	p.SetDelay(0)
	rb := electortest.MustLead(t, cb, ttl, "b")
	electortest.StillWaiting(t, cc, "c")
	if rb.Term.Token <= ra.Term.Token {
		t.Fatalf("b's token %d after a's %d", rb.Term.Token, ra.Term.Token)
	}
	t.Logf("b led after its claim failed (errors %v)", errs.snapshot())
	electortest.Resign(t, rb.Term)
	rc := electortest.MustLead(t, cc, 5*time.Second, "c")
	electortest.Resign(t, rc.Term)
}
