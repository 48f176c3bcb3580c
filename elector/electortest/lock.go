package electortest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// RunLock runs the suite of the lock features (try once, semaphores, run
// records) against h. A backend that lacks a feature skips its tests.
func RunLock(t *testing.T, h Harness) {
	runTests(t, h, []test{
		{"TryWhenFree", testTryFree, false},
		{"TryWhenHeldLeavesNothing", testTryBusy, false},
		{"SemaphoreHoldsNInOrder", testSemaphore, true},
		{"SemaphoreTry", testSemaphoreTry, true},
		{"SlotsMismatchRefused", testSlotsMismatch, true},
		{"SemaphoreCutOffHolderEndsFirst", testSemaphoreCutOff, true},
		{"SemaphoreWakesFew", testSemaphoreWakeups, true},
		{"RunRecordExpires", testRunRecord, false},
		{"RunRecordForget", testRunRecordForget, false},
	})
}

func try(ctx context.Context, e elector.Locker) (*elector.Term, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return e.TryCampaign(ctx)
}

func testTryFree(t *testing.T, h Harness) {
	el := uniqueElection(t)
	a := candidate(t, h, el, "a", 2*time.Second)
	term, err := try(context.Background(), a)
	if err != nil {
		t.Fatalf("try on a free election: %v", err)
	}
	if term.Token == 0 || term.Leader.ID != "a" {
		t.Fatalf("term = %+v", term.Leader)
	}
	if n := h.Queued(t, el); n != 1 {
		t.Fatalf("store holds %d candidates, want 1", n)
	}
	Resign(t, term)
	waitQueued(t, h, el, 0)
}

func testTryBusy(t *testing.T, h Harness) {
	el := uniqueElection(t)
	ctx := context.Background()
	a, b := candidate(t, h, el, "a", 2*time.Second), candidate(t, h, el, "b", 2*time.Second)
	ra := MustLead(t, Campaign(ctx, a), 10*time.Second, "a")
	start := time.Now()
	term, err := try(ctx, b)
	if !errors.Is(err, elector.ErrBusy) {
		t.Fatalf("try while a holds: term %v, err %v; want ErrBusy", term != nil, err)
	}
	t.Logf("busy answer in %s", time.Since(start).Round(time.Millisecond))
	if n := h.Queued(t, el); n != 1 {
		t.Fatalf("after a busy try the store holds %d candidates, want 1 (the holder)", n)
	}
	if l, err := a.Leader(ctx); err != nil || l.ID != "a" {
		t.Fatalf("Leader() = %+v, %v; want a", l, err)
	}
	Resign(t, ra.Term)
	rb, err := try(ctx, b)
	if err != nil {
		t.Fatalf("try after a resigned: %v", err)
	}
	if rb.Token <= ra.Term.Token {
		t.Fatalf("token %d after %d", rb.Token, ra.Term.Token)
	}
	Resign(t, rb)
}

// testSemaphore: of five candidates of a 3-slot semaphore the first three
// hold at once, the others wait, and each release lets exactly the next in
// line in, with a token greater than every earlier one.
func testSemaphore(t *testing.T, h Harness) {
	const slots = 3
	el := uniqueElection(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := []string{"a", "b", "c", "d", "e"}
	chans := make([]<-chan Result, len(ids))
	for i, id := range ids {
		chans[i] = Campaign(ctx, slotted(t, h, el, id, 2*time.Second, slots))
		waitQueued(t, h, el, i+1)
	}
	terms := make([]*elector.Term, len(ids))
	var last uint64
	for i := range slots {
		r := MustLead(t, chans[i], 10*time.Second, ids[i])
		terms[i] = r.Term
		nextToken(t, ids[i], r.Term, &last)
	}
	StillWaiting(t, chans[3], "d")
	StillWaiting(t, chans[4], "e")
	// Releasing the second holder lets d in (not e); then the first lets e in.
	for k, pair := range [][2]int{{1, 3}, {0, 4}} {
		Resign(t, terms[pair[0]])
		r := MustLead(t, chans[pair[1]], 10*time.Second, ids[pair[1]])
		terms[pair[1]] = r.Term
		nextToken(t, ids[pair[1]], r.Term, &last)
		if k == 0 {
			StillWaiting(t, chans[4], "e")
		}
	}
	for _, i := range []int{2, 3, 4} {
		if err := terms[i].Err(); err != nil {
			t.Fatalf("%s's term ended: %v", ids[i], err)
		}
		Resign(t, terms[i])
	}
	waitQueued(t, h, el, 0)
}

func testSemaphoreTry(t *testing.T, h Harness) {
	el := uniqueElection(t)
	ctx := context.Background()
	a, b, c := slotted(t, h, el, "a", 2*time.Second, 2), slotted(t, h, el, "b", 2*time.Second, 2), slotted(t, h, el, "c", 2*time.Second, 2)
	ra, err := try(ctx, a)
	if err != nil {
		t.Fatalf("a: %v", err)
	}
	rb, err := try(ctx, b)
	if err != nil {
		t.Fatalf("b (second slot): %v", err)
	}
	if _, err := try(ctx, c); !errors.Is(err, elector.ErrBusy) {
		t.Fatalf("c with both slots held: %v, want ErrBusy", err)
	}
	if n := h.Queued(t, el); n != 2 {
		t.Fatalf("store holds %d candidates, want 2", n)
	}
	Resign(t, ra)
	rc, err := try(ctx, c)
	if err != nil {
		t.Fatalf("c after a released: %v", err)
	}
	Resign(t, rb)
	Resign(t, rc)
	waitQueued(t, h, el, 0)
}

func testSlotsMismatch(t *testing.T, h Harness) {
	tests := []struct {
		name         string
		first, later int
	}{
		{"semaphore then more slots", 2, 3},
		{"semaphore then lock", 2, 1},
		{"lock then semaphore", 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			el := uniqueElection(t)
			ctx := context.Background()
			a := slotted(t, h, el, "a", 2*time.Second, tt.first)
			ra := MustLead(t, Campaign(ctx, a), 10*time.Second, "a")
			b := slotted(t, h, el, "b", 2*time.Second, tt.later)
			for _, mode := range []string{"campaign", "try"} {
				var r Result
				if mode == "try" {
					term, err := try(ctx, b)
					r = Result{Term: term, Err: err}
				} else {
					select {
					case r = <-Campaign(ctx, b):
					case <-time.After(10 * time.Second):
						t.Fatalf("%s with %d slots against %d: still waiting", mode, tt.later, tt.first)
					}
				}
				var se *elector.SlotsError
				if !errors.As(r.Err, &se) || se.Mine != tt.later || se.Theirs != tt.first {
					t.Fatalf("%s with %d slots against %d: term %v, err %v; want a SlotsError", mode, tt.later, tt.first, r.Term != nil, r.Err)
				}
				if n := h.Queued(t, el); n != 1 {
					t.Fatalf("after the refusal the store holds %d candidates, want 1", n)
				}
			}
			Resign(t, ra.Term)
		})
	}
}

// testSemaphoreCutOff: a holder cut off from the store ends its term, by its
// own deadline, before a waiter is granted its slot.
func testSemaphoreCutOff(t *testing.T, h Harness) {
	const ttl = 2 * time.Second
	el := uniqueElection(t)
	ctx := context.Background()
	a, pa := proxiedSlots(t, h, el, "a", ttl, 2)
	ra := MustLead(t, Campaign(ctx, a), 10*time.Second, "a")
	b := slotted(t, h, el, "b", 2*time.Second, 2)
	rb := MustLead(t, Campaign(ctx, b), 10*time.Second, "b")
	c := slotted(t, h, el, "c", 2*time.Second, 2)
	cc := Campaign(ctx, c)
	waitQueued(t, h, el, 3)
	StillWaiting(t, cc, "c")

	doneAt := make(chan time.Time, 1)
	go func() { <-ra.Term.Done(); doneAt <- time.Now() }()
	cutAt := time.Now()
	pa.Cut()
	rc := MustLead(t, cc, 4*ttl, "c")
	select {
	case aDone := <-doneAt:
		if !aDone.Before(rc.At) || !ra.Term.ValidUntil().Before(rc.At) {
			t.Fatalf("a done at %s, valid until %s, c granted at %s", aDone.Sub(cutAt), ra.Term.ValidUntil().Sub(cutAt), rc.At.Sub(cutAt))
		}
	default:
		t.Fatalf("c was granted a's slot at %s after the cut while a's term is still open", rc.At.Sub(cutAt))
	}
	if err := rb.Term.Err(); err != nil {
		t.Fatalf("b's term ended: %v", err)
	}
	t.Logf("cut at 0; a's slot went to c at %s", rc.At.Sub(cutAt).Round(time.Millisecond))
	pa.Heal()
	Resign(t, rb.Term)
	Resign(t, rc.Term)
}

// testSemaphoreWakeups: releases in a 2-slot semaphore never wake a
// candidate far back in the queue.
func testSemaphoreWakeups(t *testing.T, h Harness) {
	const slots, n, releases = 2, 12, 3
	el := uniqueElection(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cands := make([]elector.Locker, n)
	won := make(chan *elector.Term, n)
	var wg sync.WaitGroup
	for i := range n {
		cands[i] = slotted(t, h, el, fmt.Sprintf("c%02d", i), 2*time.Second, slots)
		wg.Add(1)
		go func() {
			defer wg.Done()
			term, err := cands[i].Campaign(ctx)
			if err == nil {
				won <- term
			}
		}()
		waitQueued(t, h, el, i+1)
	}
	next := func(what string) *elector.Term {
		t.Helper()
		select {
		case term := <-won:
			return term
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no new holder", what)
			return nil
		}
	}
	var holders []*elector.Term
	for range slots {
		holders = append(holders, next("first holders"))
	}
	for k := range releases {
		// Release the newest holder: the waiters just behind it watch it.
		newest := 0
		for i, term := range holders {
			if term.Token > holders[newest].Token {
				newest = i
			}
		}
		Resign(t, holders[newest])
		holders[newest] = next(fmt.Sprintf("release %d", k))
	}
	cancel()
	wg.Wait()
	// A release wakes at most the slots waiters just behind the released
	// key: candidates further back were never near one.
	far := 2*slots + releases
	total := uint64(0)
	for i, c := range cands {
		w := c.Wakeups()
		total += w
		if i >= far && w != 0 {
			t.Errorf("candidate %d, far back in the queue, was woken %d times", i, w)
		}
	}
	t.Logf("%d releases among %d candidates of %d slots: %d wakeups in all", releases, n, slots, total)
}

func testRunRecord(t *testing.T, h Harness) {
	el := uniqueElection(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := candidate(t, h, el, "a", 2*time.Second)
	rec := a
	if _, err := rec.LastRun(ctx); !errors.Is(err, elector.ErrNoRun) {
		t.Fatalf("LastRun on a fresh election: %v, want ErrNoRun", err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	want := elector.RunRecord{ID: "a", Token: 42, Started: now.Add(-time.Second), Finished: now, Expires: now.Add(2 * time.Second)}
	if err := rec.RecordRun(ctx, want, 2*time.Second); err != nil {
		t.Fatalf("RecordRun: %v", err)
	}
	// Another candidate of the election sees it; the election's queue does not.
	b := candidate(t, h, el, "b", 2*time.Second)
	got, err := b.LastRun(ctx)
	if err != nil || got.ID != want.ID || got.Token != want.Token || !got.Finished.Equal(want.Finished) || !got.Started.Equal(want.Started) {
		t.Fatalf("LastRun = %+v, %v; want %+v", got, err, want)
	}
	if n := h.Queued(t, el); n != 0 {
		t.Fatalf("the record shows as %d queued candidates", n)
	}
	// etcd rounds a lease up to whole seconds and may keep it a little longer.
	Eventually(t, 8*time.Second, "the record to lapse", func() bool {
		_, err := b.LastRun(ctx)
		return errors.Is(err, elector.ErrNoRun)
	})
	if err := rec.RecordRun(ctx, want, 0); err == nil {
		t.Fatal("RecordRun with period 0 succeeded")
	}
}

// runForgetter is what `electd lock --forget` asks of every backend's
// elector (lockrun.RunForgetter, less what Locker has).
type runForgetter interface {
	ForgetRun(ctx context.Context) error
}

// testRunRecordForget: ForgetRun clears a live record, which another
// candidate then no longer sees; it clears only the record (a holder of
// the election keeps its term), and with no record it is a no-op.
func testRunRecordForget(t *testing.T, h Harness) {
	el := uniqueElection(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := candidate(t, h, el, "a", 2*time.Second)
	fa, ok := a.(runForgetter)
	if !ok {
		t.Fatalf("%T has no ForgetRun: `electd lock --forget` cannot clear its run records", a)
	}
	if err := fa.ForgetRun(ctx); err != nil {
		t.Fatalf("ForgetRun with no record: %v", err)
	}
	term, err := try(ctx, a)
	if err != nil {
		t.Fatalf("try on a free election: %v", err)
	}
	now := time.Now().UTC()
	r := elector.RunRecord{ID: "a", Token: term.Token, Started: now, Finished: now, Expires: now.Add(time.Hour)}
	if err := a.RecordRun(ctx, r, time.Hour); err != nil {
		t.Fatalf("RecordRun: %v", err)
	}
	b := candidate(t, h, el, "b", 2*time.Second)
	if _, err := b.LastRun(ctx); err != nil {
		t.Fatalf("LastRun before ForgetRun: %v", err)
	}
	if err := b.(runForgetter).ForgetRun(ctx); err != nil {
		t.Fatalf("ForgetRun: %v", err)
	}
	if _, err := b.LastRun(ctx); !errors.Is(err, elector.ErrNoRun) {
		t.Fatalf("LastRun after ForgetRun: %v, want ErrNoRun", err)
	}
	if _, err := a.LastRun(ctx); !errors.Is(err, elector.ErrNoRun) {
		t.Fatalf("the recording candidate's LastRun after ForgetRun: %v, want ErrNoRun", err)
	}
	select {
	case <-term.Done():
		t.Fatal("ForgetRun ended the holder's term")
	default:
	}
	if l, err := b.Leader(ctx); err != nil || l.ID != "a" {
		t.Fatalf("Leader after ForgetRun = %+v, %v; want a, still holding", l, err)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("resign: %v", err)
	}
}
