package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector/electortest"
)

// A late withdraw (issue 24): a withdraw of token X drops the candidacy's
// grant on a server wherever it is committed with X, whenever it lands.
// So a candidacy must never lead with a token it withdrew, nor compute one
// at or below a token it already used; otherwise the late withdraw ends
// its grant on a server while its deadline still counts that server's
// last renewal (the lease rule assumes a server says "not held" only once
// the lease lapsed there, or after a restart), and a candidate queued
// ahead takes the server and leads while the term is still valid.

const lateTTL = 2 * time.Second

// TestLateWithdrawOfAdoptedHandover: a handover token withdrawn, then
// adopted. L leads with T; S is next in line. L's leave, handing T+1 to
// S, lands on s0 first: S finds T+1 committed to it there while s1 and s2
// still name L, and withdraws it from s0; that withdraw is held back. S's
// link to s2 breaks, and L's leave lands on s1 and s2 (T+1 committed to S
// there too). S, finding T+1 committed to it on s0 and s1, must not lead
// with it. B, queued ahead of S, then joins, and the late withdraw lands
// on s0: B must not lead while S's term is valid.
func TestLateWithdrawOfAdoptedHandover(t *testing.T) {
	h := newHarness(t, 3)
	el := faultElection(t)
	h.grantAtOnce(t, el)
	pL, addrsL := h.holdProxies(t)
	pS, addrsS := h.holdProxies(t)
	pB, addrsB := h.holdProxies(t)
	l := newElector(t, addrsL, el, "l", lateTTL)
	s := newElector(t, addrsS, el, "s", lateTTL)
	b := newElector(t, addrsB, el, "b", lateTTL)
	ctx := context.Background()

	rL := electortest.MustLead(t, electortest.Campaign(ctx, l), 5*lateTTL, "l")
	handover := strconv.FormatUint(rL.Term.Token+1, 10)
	// B campaigns first (queued ahead of S) with its steps held back.
	cutB := holdAll(pB)
	chB := electortest.Campaign(ctx, b)
	waitHeld(t, cutB[0], 5*lateTTL, "b's first join")
	chS := electortest.Campaign(ctx, s)
	electortest.Eventually(t, 5*lateTTL, "s queued on every server", func() bool { return h.queuedOn(t, el) == [3]int{2, 2, 2} })

	// 1. L's leave lands on s0 only; S withdraws T+1 there, held back.
	leave1 := pL[1].hold(func(s step) bool { return s.mode == "leave" }, false)
	leave2 := pL[2].hold(func(s step) bool { return s.mode == "leave" }, false)
	withdraw := pS[0].hold(func(s step) bool { return s.mode == "withdraw" && s.token == handover }, true)
	resigned := make(chan error, 1)
	go func() { resigned <- rL.Term.Resign(ctx) }()
	waitHeld(t, withdraw, 5*lateTTL, "s's withdraw of the handover token on s0")

	// 2. S's link to s2 breaks; L's leave lands on s1 and s2.
	broke := time.Now() // S's lease on s2 lapses within a TTL of this
	holdAll(pS[2:])
	pL[1].deliver(t, leave1)
	pL[2].deliver(t, leave2)
	for i := 1; i <= 2; i++ {
		if e, k := h.termOn(t, el, i); !strings.HasPrefix(e, "s#") || k != handover {
			t.Fatalf("s%d after L's late leave: term %q token %q, want s's entry with the handover token %s", i, e, k, handover)
		}
	}

	// 3. S leads.
	rS := electortest.MustLead(t, chS, 5*lateTTL, "s")
	t.Logf("L led with %d and resigned (handover %s); S leads with %d", rL.Term.Token, handover, rS.Term.Token)

	// 4. B joins, queued ahead of S; the late withdraw lands on s0.
	for i, c := range cutB {
		pB[i].drop(c)
	}
	electortest.Eventually(t, 5*lateTTL, "b claiming on every server", func() bool { return h.claimingOn(t, el) == [3]int{2, 2, 2} })
	// S's renewals on s0 and s1 carry its deadline past the moment its
	// lease on s2 lapses, by a margin that a loaded machine keeps.
	lapse := broke.Add(lateTTL)
	electortest.Eventually(t, 5*lateTTL, "s's deadline half a second past its lease on s2", func() bool {
		return rS.Term.ValidUntil().After(lapse.Add(lateTTL / 4))
	})
	r := pS[0].deliver(t, withdraw)
	t.Logf("the late withdraw of %s on s0: %s, s's grant there now committed with %d", handover, r[0].status, r[0].mine)

	// B may take s2 once S's lease there lapsed; it must not lead while
	// S's term is valid.
	term := fmt.Sprint(rS.Term.Token)
	held := func() bool {
		e2, _ := h.termOn(t, el, 2)
		e0, k0 := h.termOn(t, el, 0)
		return strings.HasPrefix(e2, "b#") && strings.HasPrefix(e0, "s#") && k0 == term
	}
	after := leadsOrHolds(t, chB, 3*lateTTL, "b granted s2 while s0 still holds s's term", held)
	finish(t, "s", rS, "b", chB, after)
	if err := <-resigned; err != nil {
		t.Logf("L's resign: %v (its leave was held back on s1 and s2)", err)
	}
}

// TestLateWithdrawOfRecomputedToken: a failed commit's token computed
// again. A server whose clock is ahead (here: its token key, which floors
// the next token as its clock would) makes A's token X. A's commit of X
// is lost, and A withdraws X; the withdraw to s1 is held back. A's next
// attempt must not compute X again: it commits to s1 and s2 and leads;
// then B, queued ahead, joins and the late withdraw lands on s1. B must
// not lead while A's term is valid.
func TestLateWithdrawOfRecomputedToken(t *testing.T) {
	h := newHarness(t, 3)
	el := faultElection(t)
	h.grantAtOnce(t, el)
	pA, addrsA := h.holdProxies(t)
	pB, addrsB := h.holdProxies(t)
	a := newElector(t, addrsA, el, "a", lateTTL)
	b := newElector(t, addrsB, el, "b", lateTTL)
	ctx := context.Background()

	cutB := holdAll(pB)
	chB := electortest.Campaign(ctx, b)
	waitHeld(t, cutB[0], 5*lateTTL, "b's first join")

	// s0 is ahead of the others by most of a TTL: its floor is the token's.
	now, err := h.clis[0].Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := now.Add(lateTTL * 9 / 10).UnixMicro()
	if err := h.clis[0].Set(ctx, keysFor(el).token, ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	commits := func(s step) bool { return s.mode == "hold" && s.token != "" }
	pA[0].hold(commits, false) // A's commits never reach s0
	lost1 := pA[1].hold(commits, true)
	pA[2].hold(commits, true)
	withdraw := pA[1].hold(func(s step) bool { return s.mode == "withdraw" && s.token != "" }, true)

	// 1. A's commit of X is lost; its withdraw of X to s1 is held back.
	chA := electortest.Campaign(ctx, a)
	waitHeld(t, withdraw, 5*lateTTL, "a's withdraw on s1")
	x := withdraw.reqsOf(pA[1])[0].token
	if got := lost1.reqsOf(pA[1])[0].token; got != x {
		t.Fatalf("a withdrew %s after committing %s", x, got)
	}

	// 2. A commits again, to s1 and s2, and leads.
	rA := electortest.MustLead(t, chA, 5*lateTTL, "a")
	t.Logf("a's lost commit had token %s; a leads with %d", x, rA.Term.Token)

	// 3. B joins, queued ahead of A; the late withdraw lands on s1.
	for i, c := range cutB {
		pB[i].drop(c)
	}
	electortest.Eventually(t, 5*lateTTL, "b claiming on every server", func() bool { return h.claimingOn(t, el) == [3]int{2, 2, 2} })
	r := pA[1].deliver(t, withdraw)
	t.Logf("the late withdraw of %s on s1: %s, a's grant there now committed with %d", x, r[0].status, r[0].mine)

	term := fmt.Sprint(rA.Term.Token)
	held := func() bool {
		e1, k1 := h.termOn(t, el, 1)
		return strings.HasPrefix(e1, "a#") && k1 == term
	}
	after := leadsOrHolds(t, chB, 3*lateTTL, "s1 still holds a's term", held)
	finish(t, "a", rA, "b", chB, after)
}

// grantAtOnce dates every server's state, and its record of its run
// (rediskit.EpochLua), one TTL back or more, so that the servers grant
// from the first round.
func (h *harness) grantAtOnce(t *testing.T, election string) {
	t.Helper()
	k := keysFor(election)
	for _, c := range h.clis {
		run := runOf(t, c)
		if err := c.HSet(context.Background(), k.server, "at", "0", "run", run).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HSet(context.Background(), k.born, "at", "0", "run", run).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// claimingOn counts election's claiming entries on each of three servers.
func (h *harness) claimingOn(t testing.TB, election string) [3]int {
	t.Helper()
	var n [3]int
	for i, c := range h.clis[:3] {
		v, err := c.ZCard(context.Background(), keysFor(election).claims).Result()
		if err != nil {
			t.Fatalf("count the claims on %s: %v", c.Options().Addr, err)
		}
		n[i] = int(v)
	}
	return n
}

// reqsOf decodes the steps h held on p.
func (h *hold) reqsOf(p *holdProxy) []step {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []step
	for _, args := range h.reqs {
		s, _ := stepOf(args)
		out = append(out, s)
	}
	return out
}

// leadsOrHolds waits up to within for the campaign on ch to lead (its
// result), or for holds to report that the earlier term still holds what
// keeps the campaign from leading (nil).
func leadsOrHolds(t testing.TB, ch <-chan electortest.Result, within time.Duration, what string, holds func() bool) *electortest.Result {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		select {
		case r := <-ch:
			return &r
		default:
		}
		if holds() {
			return nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for the next candidate to lead, or for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// finish ends the earlier term (resigning it unless the next candidate
// already led, in r) and checks that the next term began only after the
// earlier one ended and its deadline passed (ValidUntil is never later
// than the moment a term ended), with a greater token.
func finish(t testing.TB, first string, r1 electortest.Result, next string, ch <-chan electortest.Result, r *electortest.Result) {
	t.Helper()
	if r == nil {
		electortest.Resign(t, r1.Term)
		r2 := electortest.MustLead(t, ch, 2*lateTTL, next)
		r = &r2
	}
	if r.Err != nil {
		t.Fatalf("%s: campaign: %v", next, r.Err)
	}
	if until := r1.Term.ValidUntil(); r1.Term.Err() == nil || until.After(r.At) {
		t.Errorf("%s led (token %d) while %s's term (token %d) was valid for another %s (ended since: %v)",
			next, r.Term.Token, first, r1.Term.Token, until.Sub(r.At).Round(time.Millisecond), r1.Term.Err())
	} else {
		t.Logf("%s led with token %d, %s after %s's term ended", next, r.Term.Token, r.At.Sub(until).Round(time.Millisecond), first)
	}
	if r.Term.Token <= r1.Term.Token {
		t.Errorf("%s's token %d after %s's %d", next, r.Term.Token, first, r1.Term.Token)
	}
	_ = r.Term.Resign(context.Background())
}

// TestLateWithdrawAfterAdoption: two valid terms at once.
//
// A's commit of token T reaches servers 1 and 2 but their replies are
// lost, so A withdraws T; that withdraw reaches server 0 at once but sits
// in the network towards 1 and 2. A's next join finds T committed to it on
// 1 and 2 and adopts it as a term without a commit round (grant: "a
// majority that already holds our grant committed with one token ... is a
// term as it stands"). Then the late withdraw of T lands on server 1 and
// drops A's committed grant there ("or one committed with the commit token
// given"). B, whose campaign started before A's (its order is better; it
// was cut off until now), takes server 0 (A's uncommitted grant yields to
// the better head) and server 1 (free, B first), commits, and leads, while
// A's deadline, computed from its join on servers 1 and 2, still runs for
// most of a TTL; A's renewals to server 0 meet a transient error, and
// server 2 still holds A, so A's term does not end before its deadline.
func TestLateWithdrawAfterAdoption(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = 2 * time.Second
	election := "late-withdraw"
	ps, aAddrs := h.proxies(t)
	a := newElector(t, aAddrs, election, "a", ttl)
	b := newElector(t, h.addrs(), election, "b", ttl)
	pastEpoch(t, a)
	ctx := context.Background()

	entryB, ordB := b.core.NewEntry(), order(time.Now().Add(-time.Second)) // B started first
	entryA, ordA := a.core.NewEntry(), order(time.Now())
	startA := time.Now()

	// A joins: held (uncommitted) on all three.
	res := a.round(ctx, nil, "join", "join", entryA, ordA, 0, time.Time{}, true)
	ta := a.count(res, time.Now())
	if ta.held != 3 {
		t.Fatalf("A's join: %s", statuses(res))
	}
	tok := max(ta.floor, a.core.Seen()) + 1
	// A's commit round: lands on servers 1 and 2 (the replies are lost),
	// never reaches server 0.
	for _, i := range []int{1, 2} {
		if r := mustStep(t, a, i, "hold", entryA, ordA, tok, ta.since); r.status != "held" || r.mine != tok {
			t.Fatalf("commit on %d: %+v", i, r)
		}
	}
	// A saw no majority: it withdraws tok; the withdraw reaches server 0
	// now, servers 1 and 2 later.
	mustStep(t, a, 0, "withdraw", entryA, ordA, tok, time.Time{})

	// A's next join: tok is committed to A on 1 and 2, a majority.
	res = a.round(ctx, nil, "join", "join", entryA, ordA, 0, time.Time{}, true)
	ta = a.count(res, time.Now())
	if len(ta.committed[tok]) < 2 {
		t.Fatalf("A's second join: %s", statuses(res))
	}
	spentA := newSpent()
	spentA.add(tok) // the candidacy records the tokens it commits
	termA, err := a.grant(ctx, entryA, ordA, res, ta, startA, spentA)
	if err != nil || termA == nil {
		t.Fatalf("A's grant: %v %v", termA, err)
	}
	t.Logf("A leads with token %d, valid until +%s", termA.Token, time.Until(termA.ValidUntil()).Round(time.Millisecond))
	ps[0].Cut() // a transient fault between A and server 0: no error ends a term

	// The late withdraw of tok lands on server 1.
	if r := mustStep(t, a, 1, "withdraw", entryA, ordA, tok, time.Time{}); r.mine != 0 {
		t.Logf("late withdraw left A's grant on server 1: %+v", r)
	}

	// B joins and commits.
	resB := b.round(ctx, nil, "join", "join", entryB, ordB, 0, time.Time{}, true)
	tb := b.count(resB, time.Now())
	t.Logf("B's join: %s", statuses(resB))
	if tb.held < 2 {
		t.Logf("B holds no majority: the hole is closed")
		return
	}
	termB, err := b.grant(ctx, entryB, ordB, resB, tb, time.Now(), newSpent())
	if err != nil || termB == nil {
		t.Logf("B's grant: %v %v: the hole is closed", termB, err)
		return
	}
	t.Logf("B leads with token %d", termB.Token)

	overlap := time.Duration(0)
	for range 20 {
		now := time.Now()
		if termA.Err() == nil && termB.Err() == nil && now.Before(termA.ValidUntil()) && now.Before(termB.ValidUntil()) {
			overlap += 50 * time.Millisecond
		}
		time.Sleep(50 * time.Millisecond)
	}
	if overlap > 0 {
		t.Errorf("two valid terms at once for about %s: A (token %d, err %v) and B (token %d, err %v)",
			overlap, termA.Token, termA.Err(), termB.Token, termB.Err())
	}
}
