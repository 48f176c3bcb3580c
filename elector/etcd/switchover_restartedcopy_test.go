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

// TestSwitchoverToRestartedCopy: the successor named by a switchover was
// restarted without a clean shutdown (crash, kill -9, power cut) and queued
// again with the same --id, while its old key still waits under a lease
// the store has not expired yet. The switchover reports success, so the
// named copy (its live session) must lead at once. From the adversarial
// review of 9c934b3: target() picks the first key with that ID, the dead
// one; the transaction hands the term to it, nobody leads until its lease
// expires on the store (a TTL later), and the live copy leads only then.
func TestSwitchoverToRestartedCopy(t *testing.T) {
	const ttl = 6 * time.Second
	srv := testenv.StartEtcd(t)
	h := &harness{srv: srv}
	p := faultproxy.Start(t, srv.Endpoint())
	mk := func(id, addr string) elector.Elector {
		return h.New(t, electortest.Candidate{StoreAddr: addr, Candidate: elector.Candidate{
			Election: "restarted", ID: id, Timing: timingOf(ttl)}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, mk("a", srv.Endpoint())), 10*time.Second, "a")
	// The copy "t" before its crash: queued through the proxy, which is
	// then cut, so that it can neither renew nor revoke (a dead process).
	_ = electortest.Campaign(ctx, mk("t", p.Addr()))
	electortest.Eventually(t, 5*time.Second, "the old t queued", func() bool { return h.Queued(t, "restarted") == 2 })
	p.Cut()
	// The copy "t" after its restart.
	ct := electortest.Campaign(ctx, mk("t", srv.Endpoint()))
	electortest.Eventually(t, 5*time.Second, "the new t queued", func() bool { return h.Queued(t, "restarted") == 3 })

	if err := ra.Term.Queued(ctx, "t"); err != nil {
		t.Fatalf("Queued(t) = %v", err)
	}
	start := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	if err := ra.Term.ResignTo(rctx, "t"); err != nil {
		t.Fatalf("switchover to t: %v", err)
	}
	rt := electortest.MustLead(t, ct, ttl/3, "t (its live session), after a switchover that reported success")
	t.Logf("t led %s after the switchover", rt.At.Sub(start))
	if rt.Term.Token <= ra.Term.Token {
		t.Fatalf("t's token %d after a's %d", rt.Term.Token, ra.Term.Token)
	}
}
