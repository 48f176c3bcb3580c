package redlock

// Campaigns that a candidate reaching only a minority of the servers, or an
// outage in the first round, must not block.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/internal/redistest"
)

// TestMinorityCandidateBlocksEven: with four servers, a candidate
// that can reach only two of them (and queued first) holds its uncommitted
// grants there for ever (it renews them at every round and never
// withdraws: with fewer than a majority answering, candidacy only backs
// off), and a candidate that reaches all four servers takes the other two
// and never a third. Nobody leads while every server is up and one
// candidate reaches all of them.
func TestMinorityCandidateBlocksEven(t *testing.T) {
	h := newHarness(t, 4)
	const ttl = time.Second
	election := "minority-even"
	ps, aAddrs := h.proxies(t)
	ps[2].Cut()
	ps[3].Cut()
	a := newElector(t, aAddrs, election, "a", ttl)
	b := newElector(t, h.addrs(), election, "b", ttl)

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	chA := electortest.Campaign(ctxA, a)
	electortest.Eventually(t, 5*time.Second, "A queued on servers 0 and 1", func() bool {
		n, _ := h.clis[0].ZCard(context.Background(), keysFor(election).queue).Result()
		return n == 1
	})
	time.Sleep(100 * time.Millisecond)

	calls := func() int {
		s := redistest.CommandStats(t, h.clis[3])
		return s["evalsha"] + s["eval"]
	}
	c0 := calls()
	err := campaignWithin(t, b, 6*ttl)
	if err == nil {
		return
	}
	electortest.StillWaiting(t, chA, "a")
	t.Logf("server 3 ran %d scripts in B's %s campaign (renewal interval %s)", calls()-c0, 6*ttl, b.cfg.Timing.RenewInterval)
	t.Errorf("B, which reaches all four servers, did not lead in %s while A reaches only two: %v", 6*ttl, err)
}

// TestMinorityCandidatesBlockThree: the same with three servers and
// two candidates each cut off from two servers, both queued before a third
// that reaches all three.
func TestMinorityCandidatesBlockThree(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "minority-three"
	psA, aAddrs := h.proxies(t)
	psC, cAddrs := h.proxies(t)
	psA[1].Cut()
	psA[2].Cut()
	psC[0].Cut()
	psC[2].Cut()
	a := newElector(t, aAddrs, election, "a", ttl)
	c := newElector(t, cAddrs, election, "c", ttl)
	b := newElector(t, h.addrs(), election, "b", ttl)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chA := electortest.Campaign(ctx, a)
	chC := electortest.Campaign(ctx, c)
	electortest.Eventually(t, 5*time.Second, "A and C queued", func() bool {
		n0, _ := h.clis[0].ZCard(context.Background(), keysFor(election).queue).Result()
		n1, _ := h.clis[1].ZCard(context.Background(), keysFor(election).queue).Result()
		return n0 == 1 && n1 == 1
	})
	time.Sleep(100 * time.Millisecond)

	err := campaignWithin(t, b, 6*ttl)
	if err == nil {
		return
	}
	electortest.StillWaiting(t, chA, "a")
	electortest.StillWaiting(t, chC, "c")
	t.Errorf("B, which reaches all three servers, did not lead in %s: %v", 6*ttl, err)
}

// campaignWithin runs b's campaign for at most d; when b leads, it logs
// its token.
func campaignWithin(t *testing.T, b *Elector, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	term, err := b.Campaign(ctx)
	if err == nil {
		t.Logf("B leads with token %d", term.Token)
	}
	return err
}

// TestTryCampaignBusyAfterOutage: TryCampaign returns ErrBusy on an
// election nobody holds or waits in, after one round in which a majority
// did not answer.
//
// The first round (claim=1) reaches server 0 only; claim becomes false.
// The links to servers 1 and 2 heal; the next round (claim=0) is answered
// by all three, but an entry that does not claim is granted nothing and
// told "wait" everywhere: held+young = 0 < m, so TryCampaign leaves and
// reports busy — before the immediate re-run that claim turning true
// would have made.
func TestTryCampaignBusyAfterOutage(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "try-busy"
	ps, addrs := h.proxies(t)
	b := newElector(t, h.addrs(), election, "b", ttl)
	pastEpoch(t, b) // every server grants from now on
	a := newElector(t, addrs, election, "a", ttl)
	ps[1].Cut()
	ps[2].Cut()
	type res struct {
		term *elector.Term
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		term, err := a.TryCampaign(context.Background())
		ch <- res{term, err}
	}()
	// Campaign waits up to one call timeout for a majority of live
	// subscriptions, then the first round times out on servers 1 and 2
	// one call timeout later; heal while the second round is in flight.
	time.Sleep(2*a.core.CallTimeout() + a.core.CallTimeout()/2)
	ps[1].Heal()
	ps[2].Heal()
	select {
	case r := <-ch:
		if r.err != nil {
			queued := h.Queued(t, election)
			t.Errorf("TryCampaign on an election nobody holds (%d entries queued now): %v", queued, r.err)
			if !errors.Is(r.err, elector.ErrBusy) {
				t.Logf("(not ErrBusy)")
			}
			return
		}
		t.Logf("TryCampaign led with token %d", r.term.Token)
		_ = r.term.Resign(context.Background())
	case <-time.After(5 * ttl):
		t.Errorf("TryCampaign did not return in %s", 5*ttl)
	}
}
