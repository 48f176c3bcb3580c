package redlock

// Second adversarial review of the redlock backend (after 15a0fd0). Every
// test drives real redis-server processes; see review_test.go for the
// conventions (a late request replayed with step() at the moment it lands).

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// termOn reads server i's term hash: the holder entry and its token.
func (h *harness) termOn(t testing.TB, election string, i int) (entry, token string) {
	t.Helper()
	v, err := h.clis[i].HMGet(context.Background(), keysFor(election).term, "entry", "token").Result()
	if err != nil {
		t.Fatalf("read the term on server %d: %v", i, err)
	}
	entry, _ = v[0].(string)
	token, _ = v[1].(string)
	return entry, token
}

// TestReview2LeaderCannotRegainLapsedServer: the per-server committed key
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
func TestReview2LeaderCannotRegainLapsedServer(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "review2-regain"
	ps := h.proxies(t)
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.Addr())
	}
	l := reviewElector(t, addrs, election, "l", ttl)
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

// TestReview2TryCampaignBusyAfterOutage: TryCampaign returns ErrBusy on an
// election nobody holds or waits in, after one round in which a majority
// did not answer.
//
// The first round (claim=1) reaches server 0 only; claim becomes false.
// The links to servers 1 and 2 heal; the next round (claim=0) is answered
// by all three, but an entry that does not claim is granted nothing and
// told "wait" everywhere: held+young = 0 < m, so TryCampaign leaves and
// reports busy — before the immediate re-run that claim turning true
// would have made.
func TestReview2TryCampaignBusyAfterOutage(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "review2-try-busy"
	ps := h.proxies(t)
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.Addr())
	}
	b := reviewElector(t, h.addrs(), election, "b", ttl)
	pastEpoch(t, b) // every server grants from now on
	a := reviewElector(t, addrs, election, "a", ttl)
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
	time.Sleep(2*a.callTimeout() + a.callTimeout()/2)
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

// TestReview2RunRecordLostInRollingRestart: a leader keeps its term
// through a rolling restart of its three servers, each restarted empty one
// at a time (a minority at every instant), but the run record it wrote to
// all three is gone: LastRun says ErrNoRun and a --once-per job runs again
// within its period.
func TestReview2RunRecordLostInRollingRestart(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "review2-rolling"
	l := reviewElector(t, h.addrs(), election, "l", ttl)
	ctx := context.Background()
	term, err := l.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := elector.RunRecord{ID: "l", Token: term.Token, Started: now.Add(-time.Second), Finished: now, Expires: now.Add(time.Hour)}
	if err := l.RecordRun(ctx, rec, time.Hour); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		n, _ := h.clis[i].Exists(ctx, keysFor(election).lastRun).Result()
		if n != 1 {
			t.Fatalf("server %d lacks the record", i)
		}
	}
	tok := fmt.Sprint(term.Token)
	for i := range 3 {
		h.srvs[i].Restart(t)
		// The leader takes the server back (after its first TTL) before
		// the next one restarts.
		electortest.Eventually(t, 5*ttl, fmt.Sprintf("server %d holds the term again", i), func() bool {
			_, k := h.termOn(t, election, i)
			return k == tok
		})
	}
	if err := term.Err(); err != nil {
		t.Fatalf("the term ended in the rolling restart: %v", err)
	}
	got, err := l.LastRun(ctx)
	switch {
	case errors.Is(err, elector.ErrNoRun):
		t.Errorf("after a rolling restart (one server at a time, the term held throughout with token %d), LastRun says no run: the job that ran under this very term runs again", term.Token)
	case err != nil:
		t.Fatal(err)
	default:
		t.Logf("LastRun: %+v", got)
	}
}
