package redlock

// A leader takes back a server it lost (its lease lapsed there, or a
// handover went to another candidate there), so that its term keeps the
// quorum's fault tolerance.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector/electortest"
)

// TestLeaderCannotRegainLapsedServer: the per-server committed key
// refuses a leader's re-commit of its own token on a server where its
// lease lapsed, so the leader never takes that server back.
//
// L leads with token T on all three servers (committed = T on each).
// Server 0 is cut off from L for longer than a TTL: L's lease there
// lapses and the server drops L's grant. The link heals: L's next renewal
// (hold, commit T, claim) re-queues L, grants it (first claiming entry,
// free) and tries to commit T — refused, since T is not above committed
// (T). Every later renewal: the same ("wait"). L holds an uncommitted
// grant on server 0 for the rest of its term and its deadline rests on
// servers 1 and 2 only: the quorum has lost its fault tolerance for good.
// Then server 1 restarts empty (a single-server fault the term survives
// otherwise, TestServerRestartedEmptyMidTerm): lost = {0, 1}, n − lost <
// m, the term ends with ErrLeaseLost while every server is reachable and
// nobody else campaigns.
func TestLeaderCannotRegainLapsedServer(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "regain"
	ps, addrs := h.proxies(t)
	l := newElector(t, addrs, election, "l", ttl)
	ctx := context.Background()
	term, err := l.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok := fmt.Sprint(term.Token)
	electortest.Eventually(t, 5*ttl, "the term committed on every server", func() bool {
		for i := range 3 {
			if _, k := h.termOn(t, election, i); k != tok {
				return false
			}
		}
		return true
	})

	ps[0].Cut()
	time.Sleep(ttl + 500*time.Millisecond) // L's lease on server 0 lapses
	ps[0].Heal()
	time.Sleep(ttl) // five renewals
	entry, k := h.termOn(t, election, 0)
	t.Logf("server 0 after the link healed: term entry %q token %q (L's token %s); term err %v", entry, k, tok, term.Err())
	regained := k == tok
	if !regained {
		t.Errorf("the leader did not take server 0 back: its grant there is uncommitted (token %q), its commit of its own token %s refused", k, tok)
	}

	// A single server restart now ends the term.
	h.srvs[1].Restart(t)
	restarted := time.Now()
	select {
	case <-term.Done():
		t.Errorf("one server restart ended the term %s later (%v) although servers 0 and 2 are reachable and nobody else campaigns",
			time.Since(restarted).Round(time.Millisecond), term.Err())
	case <-time.After(2 * ttl):
		t.Logf("the term survived the restart of server 1")
	}
}

// TestHandoverSplitBlocksLeader: a handover that reaches different
// heads on different servers leaves a waiting candidate holding a
// committed grant that is no term; it never yields, so the leader never
// takes that server, and a single fault then ends its term — after which
// the leftover's holder leads at once, while the ended term's lease-rule
// deadline still ran.
//
// L leads on servers 0, 1, 2. H1 (queued first) reaches servers 0 and 1
// only; H2 (queued second) reaches all three. L resigns with handover T+1:
// on 0 and 1 it goes to H1 (the head there), on 2 to H2 (H1 is not queued
// there). H1 adopts T+1 (a majority) and leads. H2 holds server 2,
// committed with T+1 — a grant that is no term but does not yield to the
// better head (only uncommitted grants do), and that H2's joins renew for
// as long as it campaigns. H1's link to server 2 heals: its renewals there
// say "wait", for good. Server 0 restarts empty: lost = {0, 2}, H1's term
// ends (ErrLeaseLost), its cleanup hands over T+2 on server 1 to H2, and H2
// leads at once, holding 1 and 2.
func TestHandoverSplitBlocksLeader(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "handover-split"
	ps1, addrs1 := h.proxies(t)
	l := newElector(t, h.addrs(), election, "l", ttl)
	h1 := newElector(t, addrs1, election, "h1", ttl)
	h2 := newElector(t, h.addrs(), election, "h2", ttl)
	ctx := context.Background()
	termL, err := l.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ps1[2].Cut()
	ch1 := electortest.Campaign(ctx, h1)
	electortest.Eventually(t, 5*ttl, "h1 queued on servers 0 and 1", func() bool {
		n0, _ := h.clis[0].ZCard(ctx, keysFor(election).claims).Result()
		n1, _ := h.clis[1].ZCard(ctx, keysFor(election).claims).Result()
		return n0 == 2 && n1 == 2
	})
	time.Sleep(50 * time.Millisecond)
	ch2 := electortest.Campaign(ctx, h2)
	electortest.Eventually(t, 5*ttl, "h2 queued everywhere", func() bool {
		n0, _ := h.clis[0].ZCard(ctx, keysFor(election).claims).Result()
		n2, _ := h.clis[2].ZCard(ctx, keysFor(election).claims).Result()
		return n0 == 3 && n2 == 2
	})
	electortest.Resign(t, termL)
	r1 := electortest.MustLead(t, ch1, 3*ttl, "h1")
	t.Logf("L (token %d) resigned; h1 leads with token %d", termL.Token, r1.Term.Token)
	electortest.StillWaiting(t, ch2, "h2")
	e2, k2 := h.termOn(t, election, 2)
	t.Logf("server 2: term entry %q token %q", e2, k2)

	ps1[2].Heal()
	time.Sleep(ttl + 200*time.Millisecond)
	e2, k2 = h.termOn(t, election, 2)
	if !strings.HasPrefix(e2, "h1#") {
		t.Errorf("h1's link to server 2 healed a TTL ago; server 2 still holds %q committed with %q, not h1's term (token %d)", e2, k2, r1.Term.Token)
	}

	validBefore := r1.Term.ValidUntil()
	h.srvs[0].Restart(t)
	restarted := time.Now()
	select {
	case <-r1.Term.Done():
		t.Errorf("one server restart ended h1's term %s later (%v); its deadline before the restart was +%s",
			time.Since(restarted).Round(time.Millisecond), r1.Term.Err(), validBefore.Sub(restarted).Round(time.Millisecond))
	case <-time.After(2 * ttl):
		t.Logf("h1's term survived the restart of server 0")
		return
	}
	select {
	case r2 := <-ch2:
		if r2.Err == nil {
			t.Logf("h2 led %s after the restart (token %d); h1's deadline before the restart reached +%s",
				r2.At.Sub(restarted).Round(time.Millisecond), r2.Term.Token, validBefore.Sub(restarted).Round(time.Millisecond))
			if r2.At.Before(validBefore) {
				t.Logf("h2's term began %s before the deadline h1's renewals had earned (h1's term was ended early by the lost rule, and its cleanup handed over at once)",
					validBefore.Sub(r2.At).Round(time.Millisecond))
			}
		}
	case <-time.After(3 * ttl):
	}
}

// TestEarlierWaiterTakesLapsedServer: the same loss of a server as
// TestLeaderCannotRegainLapsedServer, with the committed key out of
// the way: a waiter queued before the leader (it was cut off when the
// leader won) takes the server where the leader's lease lapsed, holds an
// uncommitted grant there that it can never commit (the leader holds the
// other two) and that does not yield to the leader (only to a better
// head), and never withdraws it (no split vote: nobody else holds an
// uncommitted grant). The leader's renewals there say "taken" for the rest
// of its term; one server restart then ends the term.
func TestEarlierWaiterTakesLapsedServer(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "earlier-waiter"
	psL, addrsL := h.proxies(t)
	psB, addrsB := h.proxies(t)
	l := newElector(t, addrsL, election, "l", ttl)
	b := newElector(t, addrsB, election, "b", ttl)
	pastEpoch(t, l)
	ctx := context.Background()
	for _, p := range psB {
		p.Cut()
	}
	chB := electortest.Campaign(ctx, b)
	// B's order is its candidacy's start: after Campaign waited (one call
	// timeout) for live subscriptions.
	time.Sleep(b.core.CallTimeout() + 200*time.Millisecond)
	term, err := l.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range psB {
		p.Heal()
	}
	electortest.Eventually(t, 5*ttl, "b claims on every server", func() bool {
		for _, c := range h.clis {
			if n, _ := c.ZCard(ctx, keysFor(election).claims).Result(); n != 2 {
				return false
			}
		}
		return true
	})
	psL[0].Cut()
	time.Sleep(ttl + 500*time.Millisecond) // L's lease on server 0 lapses
	psL[0].Heal()
	time.Sleep(ttl)
	e0, k0 := h.termOn(t, election, 0)
	t.Logf("server 0 a TTL after L's link healed: term entry %q token %q (L's token %d)", e0, k0, term.Token)
	if !strings.HasPrefix(e0, "l#") || k0 != fmt.Sprint(term.Token) {
		t.Errorf("the leader did not take server 0 back: %q holds it (token %q)", e0, k0)
	}
	electortest.StillWaiting(t, chB, "b")
	h.srvs[1].Restart(t)
	restarted := time.Now()
	select {
	case <-term.Done():
		t.Errorf("one server restart ended the term %s later (%v)", time.Since(restarted).Round(time.Millisecond), term.Err())
	case <-time.After(2 * ttl):
		t.Logf("the term survived the restart of server 1")
	}
}
