package redlock

// Adversarial review of the redlock backend. Every test here drives real
// redis-server processes; where a fault needs a precise moment (a request
// that arrives after its context timed out, as TCP delivers a request
// written to a connection the client has since given up on once a
// partition heals), the late request is replayed with step() at the moment
// it lands: the server cannot tell it from the original, since a step's
// effect depends only on its arguments.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// reviewClient dials addr as electd does (requests bounded by their context).
func reviewClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// reviewElector makes an Elector for election on the given addresses (the
// servers themselves, or proxies in front of them, in server order).
func reviewElector(t testing.TB, addrs []string, election, id string, ttl time.Duration) *Elector {
	t.Helper()
	var servers []Server
	for _, a := range addrs {
		servers = append(servers, Server{Addr: a, Client: reviewClient(t, a)})
	}
	e, err := New(Config{Servers: servers, Candidate: elector.Candidate{
		Election: election, ID: id, Timing: elector.Timing{TTL: ttl}, Logger: electortest.Logger(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// pastEpoch makes every server record its epoch (born) and waits one TTL,
// so that the servers grant from now on.
func pastEpoch(t testing.TB, e *Elector) {
	t.Helper()
	ctx := context.Background()
	for i := range e.cfg.Servers {
		if _, err := e.step(ctx, i, "leave", "nobody#0", "", 0, time.Time{}, false); err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
	}
	time.Sleep(e.cfg.Timing.TTL + 50*time.Millisecond)
}

func mustStep(t testing.TB, e *Elector, i int, mode, entry, ord string, commit uint64, since time.Time) stepReply {
	t.Helper()
	r, err := e.step(context.Background(), i, mode, entry, ord, commit, since, true)
	if err != nil {
		t.Fatalf("step %s on server %d: %v", mode, i, err)
	}
	return r
}

func statuses(res []result) string {
	var s []string
	for i, r := range res {
		if r.err != nil {
			s = append(s, fmt.Sprintf("s%d:err(%v)", i, r.err))
			continue
		}
		s = append(s, fmt.Sprintf("s%d:%s/mine=%d", i, r.r.status, r.r.mine))
	}
	return strings.Join(s, " ")
}

// TestReviewLateWithdrawAfterAdoption: two valid terms at once.
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
func TestReviewLateWithdrawAfterAdoption(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = 2 * time.Second
	election := "review-late-withdraw"
	ps := h.proxies(t)
	var aAddrs []string
	for _, p := range ps {
		aAddrs = append(aAddrs, p.Addr())
	}
	a := reviewElector(t, aAddrs, election, "a", ttl)
	b := reviewElector(t, h.addrs(), election, "b", ttl)
	pastEpoch(t, a)
	ctx := context.Background()

	entryB, ordB := b.newEntry(), order(time.Now().Add(-time.Second)) // B started first
	entryA, ordA := a.newEntry(), order(time.Now())
	startA := time.Now()

	// A joins: held (uncommitted) on all three.
	res := a.round(ctx, nil, "join", "join", entryA, ordA, 0, time.Time{}, true)
	ta := a.count(res, time.Now())
	if ta.held != 3 {
		t.Fatalf("A's join: %s", statuses(res))
	}
	tok := max(ta.floor, a.seen.Load()) + 1
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

// TestReviewLateCommitTokenRegression: a later term's token below an
// earlier one's.
//
// A's commit of token T reaches server 0 only (its requests to servers 1
// and 2 sit in the network); A withdraws T from server 0 and gives up for
// a while (its leases lapse). B campaigns, commits T_B > T on all three,
// leads and resigns (no one is next in line). Then A's delayed commits of
// T land on servers 1 and 2: A is not queued there any more, so the step
// re-queues it, grants it (first in line, nobody holds) and commits T
// (the script only checks that the grant is uncommitted, not that T is
// above the server's highest token, T_B). A's next join finds T committed
// to it on a majority and adopts it: a term with token T < T_B.
func TestReviewLateCommitTokenRegression(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "review-late-commit"
	a := reviewElector(t, h.addrs(), election, "a", ttl)
	b := reviewElector(t, h.addrs(), election, "b", ttl)
	pastEpoch(t, a)
	ctx := context.Background()

	entryA, ordA := a.newEntry(), order(time.Now())
	res := a.round(ctx, nil, "join", "join", entryA, ordA, 0, time.Time{}, true)
	ta := a.count(res, time.Now())
	if ta.held != 3 {
		t.Fatalf("A's join: %s", statuses(res))
	}
	tok := max(ta.floor, a.seen.Load()) + 1
	since := ta.since
	mustStep(t, a, 0, "hold", entryA, ordA, tok, since) // the commit reaches server 0 only
	mustStep(t, a, 0, "withdraw", entryA, ordA, tok, time.Time{})
	time.Sleep(ttl + 100*time.Millisecond) // A's leases lapse everywhere

	// B's whole term.
	entryB, ordB := b.newEntry(), order(time.Now())
	resB := b.round(ctx, nil, "join", "join", entryB, ordB, 0, time.Time{}, true)
	tb := b.count(resB, time.Now())
	termB, err := b.grant(ctx, entryB, ordB, resB, tb, time.Now(), newSpent())
	if err != nil || termB == nil {
		t.Fatalf("B's grant: %v %v (%s)", termB, err, statuses(resB))
	}
	t.Logf("A's withdrawn token %d; B's term token %d", tok, termB.Token)
	if err := termB.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	// A's delayed commits land on servers 1 and 2.
	for _, i := range []int{1, 2} {
		r := mustStep(t, a, i, "hold", entryA, ordA, tok, since)
		t.Logf("late commit on %d: status %s mine %d", i, r.status, r.mine)
	}
	// A's next join and grant.
	res = a.round(ctx, nil, "join", "join", entryA, ordA, 0, time.Time{}, true)
	ta = a.count(res, time.Now())
	termA, err := a.grant(ctx, entryA, ordA, res, ta, time.Now(), newSpent())
	if err != nil || termA == nil {
		t.Fatalf("A's grant: %v %v (%s)", termA, err, statuses(res))
	}
	if termA.Token <= termB.Token {
		t.Errorf("token regression: B's term had token %d, the later term of A has %d", termB.Token, termA.Token)
	}
}

// TestReviewMinorityCandidateBlocksEven: with four servers, a candidate
// that can reach only two of them (and queued first) holds its uncommitted
// grants there for ever (it renews them at every round and never
// withdraws: with fewer than a majority answering, candidacy only backs
// off), and a candidate that reaches all four servers takes the other two
// and never a third. Nobody leads while every server is up and one
// candidate reaches all of them.
func TestReviewMinorityCandidateBlocksEven(t *testing.T) {
	h := newHarness(t, 4)
	const ttl = time.Second
	election := "review-minority-even"
	ps := h.proxies(t)
	var aAddrs []string
	for _, p := range ps {
		aAddrs = append(aAddrs, p.Addr())
	}
	ps[2].Cut()
	ps[3].Cut()
	a := reviewElector(t, aAddrs, election, "a", ttl)
	b := reviewElector(t, h.addrs(), election, "b", ttl)

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	chA := electortest.Campaign(ctxA, a)
	electortest.Eventually(t, 5*time.Second, "A queued on servers 0 and 1", func() bool {
		n, _ := h.clis[0].ZCard(context.Background(), keysFor(election).queue).Result()
		return n == 1
	})
	time.Sleep(100 * time.Millisecond)

	calls := func() int64 {
		info, _ := h.clis[3].Info(context.Background(), "commandstats").Result()
		var n int64
		for _, ln := range strings.Split(info, "\n") {
			if strings.HasPrefix(ln, "cmdstat_evalsha:") || strings.HasPrefix(ln, "cmdstat_eval:") {
				var c int64
				fmt.Sscanf(ln[strings.Index(ln, "calls=")+6:], "%d", &c)
				n += c
			}
		}
		return n
	}
	c0 := calls()
	ctxB, cancelB := context.WithTimeout(context.Background(), 6*ttl)
	defer cancelB()
	term, err := b.Campaign(ctxB)
	if err == nil {
		t.Logf("B leads with token %d", term.Token)
		return
	}
	electortest.StillWaiting(t, chA, "a")
	t.Logf("server 3 ran %d scripts in B's %s campaign (renewal interval %s)", calls()-c0, 6*ttl, b.cfg.Timing.RenewInterval)
	t.Errorf("B, which reaches all four servers, did not lead in %s while A reaches only two: %v", 6*ttl, err)
}

// TestReviewMinorityCandidatesBlockThree: the same with three servers and
// two candidates each cut off from two servers, both queued before a third
// that reaches all three.
func TestReviewMinorityCandidatesBlockThree(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "review-minority-three"
	psA, psC := h.proxies(t), h.proxies(t)
	var aAddrs, cAddrs []string
	for i := range psA {
		aAddrs = append(aAddrs, psA[i].Addr())
		cAddrs = append(cAddrs, psC[i].Addr())
	}
	psA[1].Cut()
	psA[2].Cut()
	psC[0].Cut()
	psC[2].Cut()
	a := reviewElector(t, aAddrs, election, "a", ttl)
	c := reviewElector(t, cAddrs, election, "c", ttl)
	b := reviewElector(t, h.addrs(), election, "b", ttl)

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

	ctxB, cancelB := context.WithTimeout(context.Background(), 6*ttl)
	defer cancelB()
	term, err := b.Campaign(ctxB)
	if err == nil {
		t.Logf("B leads with token %d", term.Token)
		return
	}
	electortest.StillWaiting(t, chA, "a")
	electortest.StillWaiting(t, chC, "c")
	t.Errorf("B, which reaches all three servers, did not lead in %s: %v", 6*ttl, err)
}

// TestReviewLateJoinAfterCleanup: a join that arrives after the campaign
// that sent it ended (and left every server) queues a dead entry first in
// line; it holds an uncommitted grant until its lease lapses, so the next
// candidate waits about one TTL for nobody.
func TestReviewLateJoinAfterCleanup(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = 2 * time.Second
	election := "review-late-join"
	a := reviewElector(t, h.addrs(), election, "a", ttl)
	b := reviewElector(t, h.addrs(), election, "b", ttl)
	pastEpoch(t, a)

	entryA, ordA := a.newEntry(), order(time.Now())
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

// TestReviewCloseStopsEverything: after Close, no goroutine the Elector
// started is left, in a term, while observing, and in a campaign cut off
// from every server.
func TestReviewCloseStopsEverything(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "review-close"
	before := runtime.NumGoroutine()

	func() {
		a := reviewElector(t, h.addrs(), election, "a", ttl)
		ctx := context.Background()
		obs := a.Observe(ctx)
		term, err := a.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = a.Close()
		select {
		case <-term.Done():
		case <-time.After(time.Second):
			t.Fatal("term not ended by Close")
		}
		for range obs {
		}
	}()

	ps := h.proxies(t)
	var addrs []string
	for _, p := range ps {
		p.Cut()
		addrs = append(addrs, p.Addr())
	}
	c := reviewElector(t, addrs, election, "c", ttl)
	ch := electortest.Campaign(context.Background(), c)
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	_ = c.Close()
	t.Logf("Close took %s with every server cut off (see TestReviewCloseCutOff)", time.Since(t0).Round(time.Millisecond))
	if r := <-ch; !errors.Is(r.Err, elector.ErrClosed) {
		t.Errorf("campaign after Close: %v", r.Err)
	}
	for _, p := range ps {
		p.Heal()
	}
	var left []string
	for range 50 {
		left = redlockGoroutines()
		if len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("%d goroutines of the package left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	_ = before
}

// redlockGoroutines are the stacks running this package's code, other
// than tests.
func redlockGoroutines() []string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "elector/redlock.(") || strings.Contains(g, "elector/redlock.fanOut") {
			if !strings.Contains(g, "elector/redlock.TestReview") && !strings.Contains(g, "testing.tRunner") {
				out = append(out, g)
			}
		}
	}
	return out
}

// TestReviewCloseCutOff: Close takes about 5 s while every server is black
// holed (a partition), whatever the TTL: bus.run is inside
// Client.Subscribe(e.ctx, ...), whose connection handshake (HELLO) reads
// with go-redis's own timeout, since e.ctx has no deadline and a cancelled
// context does not interrupt a read; and bus.close cannot close a PubSub
// that Subscribe has not returned yet.
func TestReviewCloseCutOff(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	ps := h.proxies(t)
	var addrs []string
	for _, p := range ps {
		p.Cut()
		addrs = append(addrs, p.Addr())
	}
	c := reviewElector(t, addrs, "review-close-cut", "c", ttl)
	ch := electortest.Campaign(context.Background(), c)
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Logf("still closing after 1s:\n%s", strings.Join(redlockGoroutines(), "\n\n"))
		}
	}()
	_ = c.Close()
	close(done)
	<-ch
	if d := time.Since(t0); d > ttl {
		t.Errorf("Close took %s with every server cut off (TTL %s)", d.Round(time.Millisecond), ttl)
	}
	for _, p := range ps {
		p.Heal()
	}
}

// TestLateStepAfterLeave: a renewal held by the network that lands after
// its candidate left must not queue the entry again (it would take the
// next handover, and Leader would name it, for up to a lease). A leave is
// recorded for two TTLs, and steps of that entry are refused meanwhile.
func TestLateStepAfterLeave(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	a := reviewElector(t, h.addrs(), "late-step", "a", ttl)
	pastEpoch(t, a)
	ctx := context.Background()
	entry, ord := a.newEntry(), order(time.Now())
	for i := range 3 {
		mustStep(t, a, i, "join", entry, ord, 0, time.Time{})
	}
	if err := a.leave(ctx, "leave", entry, 0); err != nil {
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
