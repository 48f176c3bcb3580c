package electortest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// Run runs the whole conformance suite against h.
func Run(t *testing.T, h Harness) {
	runTests(t, h, []test{
		{"LoneCandidateLeads", testLoneCandidate, false},
		{"ArrivalOrder", testArrivalOrder, false},
		{"ResignHandsOver", testResignHandsOver, false},
		{"Switchover", testSwitchover, false},
		{"SwitchoverTargetGone", testSwitchoverTargetGone, false},
		{"SwitchoverToRestartedCandidate", testSwitchoverToRestartedCandidate, false},
		{"TokensIncrease", testTokensIncrease, false},
		{"ObserveEveryChange", testObserve, false},
		{"CutOffLeaderStepsDownFirst", testCutOff, false},
		{"StoreRestart", testStoreRestart, false},
		{"CancelLeavesNoKey", testCancel, false},
		{"CrowdWakesOnlySuccessor", testCrowd, false},
		{"Status", testStatus, false},
		{"StatusSemaphore", testStatusSemaphore, true},
	})
}

func testLoneCandidate(t *testing.T, h Harness) {
	el := uniqueElection(t)
	var renewals renewalTimes
	a := h.New(t, Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
		Election: el, ID: "a", Address: "http://a.test:4040", Timing: timing(2 * time.Second), Instrument: &renewals}})
	r := MustLead(t, Campaign(context.Background(), a), 10*time.Second, "a")
	term := r.Term
	if term.Token == 0 || term.Leader.ID != "a" || term.Leader.Token != term.Token {
		t.Fatalf("term = %+v, want id a and a non-zero token", term.Leader)
	}
	if !term.ValidUntil().After(time.Now()) {
		t.Fatalf("fresh term's ValidUntil %v is not in the future", term.ValidUntil())
	}
	select {
	case <-term.Done():
		t.Fatalf("fresh term already done: %v", term.Err())
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	Eventually(t, 5*time.Second, "Leader() to report a", func() bool {
		l, err := a.Leader(ctx)
		return err == nil && l.ID == "a" && l.Token == term.Token
	})
	// Renewals keep the term alive past one TTL.
	Eventually(t, 10*time.Second, "ValidUntil to move forward", func() bool {
		return term.ValidUntil().After(r.At.Add(2 * time.Second))
	})
	if err := term.Err(); err != nil {
		t.Fatalf("term ended while renewing: %v", err)
	}
	// Each renewal that counted was reported, with the time it took.
	if took := renewals.all(); len(took) == 0 || slices.ContainsFunc(took, func(d time.Duration) bool { return d < 0 || d >= 2*time.Second }) {
		t.Fatalf("renewals reported: %v; want at least one, each between 0 and the TTL", took)
	}
	Resign(t, term)
	Eventually(t, 5*time.Second, "no leader after resign", func() bool {
		_, err := a.Leader(ctx)
		return errors.Is(err, elector.ErrNoLeader)
	})
}

func testArrivalOrder(t *testing.T, h Harness) {
	el := uniqueElection(t)
	ctx := context.Background()
	ids := []string{"a", "b", "c"}
	chans := make([]<-chan Result, len(ids))
	for i, id := range ids {
		chans[i] = Campaign(ctx, candidate(t, h, el, id, 2*time.Second))
		waitQueued(t, h, el, i+1) // each joins after the previous one queued
	}
	var last uint64
	for i, id := range ids {
		r := MustLead(t, chans[i], 10*time.Second, id)
		for _, later := range chans[i+1:] {
			StillWaiting(t, later, "a later candidate")
		}
		nextToken(t, id, r.Term, &last)
		Resign(t, r.Term)
	}
}

func testResignHandsOver(t *testing.T, h Harness) {
	el := uniqueElection(t)
	const ttl = 5 * time.Second
	ctx := context.Background()
	a, b := candidate(t, h, el, "a", ttl), candidate(t, h, el, "b", ttl)
	ra := MustLead(t, Campaign(ctx, a), 10*time.Second, "a")
	cb := Campaign(ctx, b)
	waitQueued(t, h, el, 2)
	StillWaiting(t, cb, "b")
	start := time.Now()
	Resign(t, ra.Term)
	rb := MustLead(t, cb, ttl, "b")
	// Well under the TTL: the handover was driven by the resignation, not
	// by the old lease expiring.
	handedOver(t, "handover after resign", start, ttl, ra, rb)
	Resign(t, rb.Term)
}

func testTokensIncrease(t *testing.T, h Harness) {
	el := uniqueElection(t)
	ctx := context.Background()
	cands := []elector.Elector{candidate(t, h, el, "a", 2*time.Second), candidate(t, h, el, "b", 2*time.Second)}
	var last uint64
	for i := range 6 {
		who := fmt.Sprintf("term %d", i)
		r := MustLead(t, Campaign(ctx, cands[i%2]), 10*time.Second, who)
		nextToken(t, who, r.Term, &last)
		Resign(t, r.Term)
	}
}

func testObserve(t *testing.T, h Harness) {
	el := uniqueElection(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watcher := candidate(t, h, el, "watcher", 2*time.Second)
	o := observe(ctx, watcher)
	Eventually(t, 5*time.Second, "initial 'no leader'", func() bool { return slices.Equal(o.ids(), []string{"<none>"}) })

	a, b := candidate(t, h, el, "a", 2*time.Second), candidate(t, h, el, "b", 2*time.Second)
	ra := MustLead(t, Campaign(ctx, a), 10*time.Second, "a")
	o.awaitLast(t, 5*time.Second, "a's term observed", ra.Term.Leader.SameTerm)
	// Every copy reports the same start of the term as its holder.
	Eventually(t, 5*time.Second, "observed since = the term's since", func() bool {
		l, _ := o.last()
		d := l.Since.Sub(ra.Term.Leader.Since)
		return d < time.Millisecond && d > -time.Millisecond
	})
	cb := Campaign(ctx, b)
	waitQueued(t, h, el, 2)
	Resign(t, ra.Term)
	rb := MustLead(t, cb, 10*time.Second, "b")
	// b may be observed first with a lower token than its term's, a grant
	// it did not lead with (see checkObserved); its term follows.
	o.awaitLast(t, 5*time.Second, "b's term observed", rb.Term.Leader.SameTerm)
	Resign(t, rb.Term)
	terms := []elector.Leader{ra.Term.Leader, rb.Term.Leader}
	for end := time.Now().Add(5 * time.Second); ; {
		err := checkObserved(o.values(), terms)
		if err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("observed %v (a's term token %d, b's %d): %v", o, ra.Term.Token, rb.Term.Token, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the observer's record, not synchronising
	}
	t.Logf("observed %v", o)

	// Observe's channel closes when its context ends.
	cctx, ccancel := context.WithCancel(context.Background())
	ch := watcher.Observe(cctx)
	ccancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Observe channel not closed after its context ended")
		}
	}
}

// testCutOff: a leader that can no longer reach the store must have ended
// its term, by its own deadline, before any other candidate is granted one.
func testCutOff(t *testing.T, h Harness) {
	el := uniqueElection(t)
	const ttl = 2 * time.Second
	ctx := context.Background()
	a, pa := proxied(t, h, el, "a", ttl)
	b := candidate(t, h, el, "b", ttl)
	ra := MustLead(t, Campaign(ctx, a), 10*time.Second, "a")
	cb := Campaign(ctx, b)
	waitQueued(t, h, el, 2)

	doneAt := make(chan time.Time, 1)
	go func() { <-ra.Term.Done(); doneAt <- time.Now() }()
	cutAt := time.Now()
	pa.Cut()

	rb := MustLead(t, cb, 4*ttl, "b")
	var aDone time.Time
	select {
	case aDone = <-doneAt:
	default:
		t.Fatalf("b was granted a term at %s after the cut while a's term is still open (a valid until %s)",
			rb.At.Sub(cutAt), ra.Term.ValidUntil().Sub(cutAt))
	}
	validUntil := ra.Term.ValidUntil()
	if !aDone.Before(rb.At) {
		t.Fatalf("a's Done closed %s after b's grant", aDone.Sub(rb.At))
	}
	if !validUntil.Before(rb.At) {
		t.Fatalf("a's ValidUntil is %s after b's grant", validUntil.Sub(rb.At))
	}
	if !errors.Is(ra.Term.Err(), elector.ErrLeaseExpired) && !errors.Is(ra.Term.Err(), elector.ErrLeaseLost) {
		t.Fatalf("cut-off term ended with %v, want ErrLeaseExpired", ra.Term.Err())
	}
	if rb.Term.Token <= ra.Term.Token {
		t.Fatalf("token %d after %d", rb.Term.Token, ra.Term.Token)
	}
	t.Logf("cut at 0; a done at %s (ValidUntil %s); b granted at %s: margin %s",
		aDone.Sub(cutAt).Round(time.Millisecond), validUntil.Sub(cutAt).Round(time.Millisecond),
		rb.At.Sub(cutAt).Round(time.Millisecond), rb.At.Sub(validUntil).Round(time.Millisecond))
	pa.Heal()
	Resign(t, rb.Term)
}

// testStoreRestart: restarting the store under a leader never yields two
// overlapping terms, and a leader exists again afterwards.
func testStoreRestart(t *testing.T, h Harness) {
	el := uniqueElection(t)
	const ttl = 2 * time.Second
	var cands []elector.Elector
	for _, id := range []string{"a", "b", "c"} {
		cands = append(cands, candidate(t, h, el, id, ttl))
	}
	terms := CampaignLoop(t, cands...)
	Eventually(t, 10*time.Second, "a first leader", func() bool {
		_, ok := terms.Leading()
		return ok
	})
	restartAt := time.Now()
	h.Restart(t)
	// A leader holds after the restart: a term granted since, or one that
	// is still open a full TTL after the store came back.
	back := time.Now()
	Eventually(t, 8*ttl, "a leader after the restart", func() bool {
		s, ok := terms.Leading()
		return ok && (s.Start.After(restartAt) || time.Since(back) > ttl)
	})
	spans := terms.Stop(t)
	t.Logf("%d terms around a store restart, none overlapping", len(spans))
}

func testCancel(t *testing.T, h Harness) {
	el := uniqueElection(t)
	a, b := candidate(t, h, el, "a", 2*time.Second), candidate(t, h, el, "b", 2*time.Second)
	ra := MustLead(t, Campaign(context.Background(), a), 10*time.Second, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cb := Campaign(ctx, b)
	waitQueued(t, h, el, 2)
	cancel()
	select {
	case r := <-cb:
		if !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("cancelled campaign returned term=%v err=%v, want context.Canceled", r.Term != nil, r.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("campaign did not return after its context was cancelled")
	}
	if n := h.Queued(t, el); n != 1 {
		t.Fatalf("after cancel the store holds %d candidates, want 1 (the leader)", n)
	}
	Resign(t, ra.Term)
	waitQueued(t, h, el, 0)
}

// testCrowd: 50 candidates, exactly one leader at a time, and each leader's
// exit wakes only its successor.
func testCrowd(t *testing.T, h Harness) {
	const n, handovers = 50, 5
	el := uniqueElection(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cands := make([]elector.Locker, n)
	won := make(chan int, n)
	terms := make([]*elector.Term, n)
	var wg sync.WaitGroup
	for i := range n {
		cands[i] = candidate(t, h, el, fmt.Sprintf("c%02d", i), 5*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			term, err := cands[i].Campaign(ctx)
			if err != nil {
				return
			}
			terms[i] = term
			won <- i
		}()
	}
	waitQueued(t, h, el, n)
	led := map[int]bool{}
	// The wake-ups counted are those of the handovers, from the first
	// leader's term on: while the crowd joins, a store whose candidates
	// join each server in their own order (Redlock) may name a waiter the
	// head of one server's line for a moment.
	base := make([]uint64, n)
	for k := range handovers + 1 {
		var i int
		select {
		case i = <-won:
		case <-time.After(15 * time.Second):
			t.Fatalf("handover %d: no leader", k)
		}
		select {
		case j := <-won:
			t.Fatalf("two leaders at once: %d and %d", i, j)
		default:
		}
		if k == 0 {
			for j, c := range cands {
				base[j] = c.Wakeups()
			}
		}
		led[i] = true
		Resign(t, terms[i])
	}
	// The last resignation woke one more successor.
	select {
	case i := <-won:
		led[i] = true
	case <-time.After(15 * time.Second):
		t.Fatal("no leader after the last handover")
	}
	cancel()
	wg.Wait()
	for _, c := range cands {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	woken := 0
	for i, c := range cands {
		w := c.Wakeups() - base[i]
		if !led[i] && w != 0 {
			t.Errorf("candidate %d never led but was woken %d times", i, w)
		}
		woken += int(w)
	}
	t.Logf("%d handovers among %d candidates: %d wakeups in all (%d before the first leader's term)", handovers, n, woken, sumOf(base))
}

func sumOf(v []uint64) uint64 {
	var s uint64
	for _, x := range v {
		s += x
	}
	return s
}
