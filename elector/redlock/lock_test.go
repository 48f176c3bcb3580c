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
