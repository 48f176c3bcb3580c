package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/electd/electd/elector/electortest"
)

// TestTokensGrowWhileServersEmpty: between every two terms one server of
// three (or two of five) is killed and comes back empty, so the servers'
// token keys keep being lost. Tokens still strictly increase, and every
// term, when it starts, has its token committed on a majority: the
// servers every later majority meets (see "Fencing tokens" in the package
// documentation). Terms end alternately by resignation (a handover that
// commits the token + 1) and by a lapsed lease.
func TestTokensGrowWhileServersEmpty(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := newHarness(t, n)
			el := faultElection(t)
			ctx := context.Background()
			var last uint64
			var lastEnd time.Time
			for i := range 8 {
				who := fmt.Sprintf("term %d", i)
				c, links := h.proxied(t, el, fmt.Sprintf("c%d", i))
				r := electortest.MustLead(t, electortest.Campaign(ctx, c), 6*faultTTL, who)
				if r.Term.Token <= last {
					t.Fatalf("%s: token %d after %d", who, r.Term.Token, last)
				}
				if !lastEnd.IsZero() && !lastEnd.Before(r.At) {
					t.Fatalf("%s began %s before the last term's deadline", who, lastEnd.Sub(r.At))
				}
				if got := h.committedOn(t, el, r.Term.Token); got < majority(n) {
					t.Fatalf("%s started with its token %d committed on %d of %d servers, want a majority", who, r.Term.Token, got, n)
				}
				last = r.Term.Token
				// Empty a minority, at random.
				for _, k := range rand.Perm(n)[:n-majority(n)] {
					h.srvs[k].Restart(t)
				}
				if i%2 == 0 {
					// The term may have ended already: emptying servers
					// that held it may leave it without a majority.
					if err := r.Term.Resign(ctx); err != nil {
						t.Fatalf("%s: resign: %v", who, err)
					}
				} else {
					// Cut off: the term ends by its deadline, its leases lapse.
					for _, p := range links {
						p.Cut()
					}
					<-r.Term.Done()
				}
				lastEnd = r.Term.ValidUntil()
			}
		})
	}
}

// committedOn counts the servers that name the term committed with token
// and whose token key is at least token.
func (h *harness) committedOn(t *testing.T, election string, token uint64) int {
	t.Helper()
	k := keysFor(election)
	n := 0
	for _, c := range h.clis {
		tok, err := c.HGet(context.Background(), k.term, "token").Result()
		if err != nil || tok != fmt.Sprint(token) {
			continue
		}
		stored, err := c.Get(context.Background(), k.token).Result()
		if err != nil {
			continue
		}
		if v, err := strconv.ParseUint(stored, 10, 64); err == nil && v >= token {
			n++
		}
	}
	return n
}

// TestLateCommitTokenRegression: a later term's token below an
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
func TestLateCommitTokenRegression(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "late-commit"
	a := newElector(t, h.addrs(), election, "a", ttl)
	b := newElector(t, h.addrs(), election, "b", ttl)
	pastEpoch(t, a)
	ctx := context.Background()

	entryA, ordA := a.core.NewEntry(), order(time.Now())
	res := a.round(ctx, nil, "join", "join", entryA, ordA, 0, time.Time{}, true)
	ta := a.count(res, time.Now())
	if ta.held != 3 {
		t.Fatalf("A's join: %s", statuses(res))
	}
	tok := max(ta.floor, a.core.Seen()) + 1
	since := ta.since
	mustStep(t, a, 0, "hold", entryA, ordA, tok, since) // the commit reaches server 0 only
	mustStep(t, a, 0, "withdraw", entryA, ordA, tok, time.Time{})
	time.Sleep(ttl + 100*time.Millisecond) // A's leases lapse everywhere

	// B's whole term.
	entryB, ordB := b.core.NewEntry(), order(time.Now())
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
