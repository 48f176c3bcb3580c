package redlock

// The run record (RecordRun, LastRun) across server restarts.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// TestRunRecordLostInRollingRestart: a leader keeps its term
// through a rolling restart of its three servers, each restarted empty one
// at a time (a minority at every instant), but the run record it wrote to
// all three is gone: LastRun says ErrNoRun and a --once-per job runs again
// within its period.
func TestRunRecordLostInRollingRestart(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "rolling"
	l := newElector(t, h.addrs(), election, "l", ttl)
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

// TestForgetRunQuorum: ForgetRun clears the run record once a majority
// has deleted it. A server it could not reach keeps the record, and the
// next LastRun copies it back (the job is skipped, never run twice) until
// a ForgetRun that reaches it; without a majority it fails, retryable, and
// the record stays.
func TestForgetRunQuorum(t *testing.T) {
	h := newHarness(t, 3)
	election := "forget-quorum"
	ps, addrs := h.proxies(t)
	forgetter := newElector(t, addrs, election, "operator", time.Second)
	reader := newElector(t, h.addrs(), election, "reader", time.Second)
	ctx := context.Background()
	now := time.Now()
	rec := elector.RunRecord{ID: "job", Token: 7, Started: now, Finished: now, Expires: now.Add(time.Hour)}
	if err := reader.RecordRun(ctx, rec, time.Hour); err != nil {
		t.Fatal(err)
	}
	onServers := func() (n int) {
		for _, c := range h.clis {
			k, err := c.Exists(ctx, keysFor(election).lastRun).Result()
			if err != nil {
				t.Fatal(err)
			}
			n += int(k)
		}
		return n
	}
	forget := func() error {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return forgetter.ForgetRun(fctx)
	}

	ps[1].Cut()
	ps[2].Cut()
	var se *elector.StoreError
	if err := forget(); !errors.As(err, &se) || se.Permanent {
		t.Fatalf("ForgetRun with 1 of 3 servers: %v, want a retryable *elector.StoreError", err)
	}
	if n := onServers(); n != 2 {
		t.Fatalf("after a ForgetRun without a majority, %d servers hold the record, want 2 (the ones it could not reach)", n)
	}

	ps[1].Heal()
	if err := forget(); err != nil {
		t.Fatalf("ForgetRun with 2 of 3 servers: %v", err)
	}
	if n := onServers(); n != 1 {
		t.Fatalf("after ForgetRun on a majority, %d servers hold the record, want 1 (the one cut off)", n)
	}
	// The server that missed it answers again: a read finds the record
	// there and repairs the others with it.
	ps[2].Heal()
	if got, err := reader.LastRun(ctx); err != nil || got.ID != "job" {
		t.Fatalf("LastRun once the cut-off server answers = %+v, %v; want the record it kept", got, err)
	}
	if err := forget(); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.LastRun(ctx); !errors.Is(err, elector.ErrNoRun) {
		t.Fatalf("LastRun after a ForgetRun that reached every server: %v, want ErrNoRun", err)
	}
	if n := onServers(); n != 0 {
		t.Fatalf("%d servers still hold the record", n)
	}
}
