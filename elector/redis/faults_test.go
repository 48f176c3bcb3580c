package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/internal/redistest"
	"github.com/electd/electd/internal/faultproxy"
)

// TestWaiterCutOffRejoinsBehind: a waiter whose lease lapses while cut off
// rejoins, once healed, with a new entry at the back of the queue.
func TestWaiterCutOffRejoinsBehind(t *testing.T) {
	srv, cli := startRedis(t)
	p := faultproxy.Start(t, srv.Addr())
	ctx := context.Background()
	a := newElector(t, srv.Addr(), "rejoin", "a")
	b := newElector(t, p.Addr(), "rejoin", "b")
	c := newElector(t, srv.Addr(), "rejoin", "c")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")
	cb := electortest.Campaign(ctx, b)
	waitQueued(t, cli, "rejoin", 2)
	cc := electortest.Campaign(ctx, c)
	waitQueued(t, cli, "rejoin", 3)

	p.Cut()
	// The leader's renewals prune b once its server deadline passes.
	waitQueued(t, cli, "rejoin", 2)
	p.Heal()
	waitQueued(t, cli, "rejoin", 3)
	_, entries := electionKeys(t, cli, "rejoin")
	if n := strings.Count(strings.Join(entries, " "), "b#"); n != 3 { // queue, expiry, cand
		t.Fatalf("b has %d traces in %v, want one entry", n, entries)
	}
	electortest.Resign(t, ra.Term)
	rc := electortest.MustLead(t, cc, testTTL, "c")
	electortest.StillWaiting(t, cb, "b")
	electortest.Resign(t, rc.Term)
	electortest.Resign(t, electortest.MustLead(t, cb, testTTL, "b").Term)
}

// TestCrashedLeaderObservedGone: a leader that stops renewing without a word
// is reported gone by Observe at its server deadline, with no waiter around
// to prune it.
func TestCrashedLeaderObservedGone(t *testing.T) {
	srv, _ := startRedis(t)
	p := faultproxy.Start(t, srv.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newElector(t, srv.Addr(), "crash", "w")
	a := newElector(t, p.Addr(), "crash", "a")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")
	ch := w.Observe(ctx)
	for l := range ch {
		if l.ID == "a" {
			break
		}
	}
	cut := time.Now()
	p.Cut()
	select {
	case l := <-ch:
		if !l.IsZero() {
			t.Fatalf("observed %+v, want none", l)
		}
	case <-time.After(3 * testTTL):
		t.Fatal("crashed leader still observed")
	}
	gone := time.Since(cut)
	if vu := ra.Term.ValidUntil(); time.Now().Before(vu) {
		t.Fatalf("observed no leader before a's ValidUntil")
	}
	if gone > testTTL+testTTL/2 {
		t.Fatalf("crash noticed %s after the last renewal", gone)
	}
	t.Logf("crashed leader reported gone %s after the cut", gone.Round(time.Millisecond))

	// Close ends the channel too.
	ch2 := w.Observe(context.Background())
	<-ch2 // current
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch2; ok {
		t.Fatal("Observe channel open after Close")
	}
	if _, err := w.Leader(ctx); !errors.Is(err, elector.ErrClosed) {
		t.Fatalf("Leader after Close = %v", err)
	}
}

// TestLeaderAnswersFromView: once the view is in sync, Leader costs no
// store request.
func TestLeaderAnswersFromView(t *testing.T) {
	srv, cli := startRedis(t)
	ctx := context.Background()
	a := newElector(t, srv.Addr(), "view", "a")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")
	w := newElector(t, srv.Addr(), "view", "w")
	if l, err := w.Leader(ctx); err != nil || l != ra.Term.Leader { // starts the view
		t.Fatalf("Leader = %+v, %v", l, err)
	}
	electortest.Eventually(t, 2*time.Second, "the view to sync", func() bool {
		_, ok := w.view.current()
		return ok
	})
	before := redistest.CommandStats(t, cli)
	start := time.Now()
	for range 1000 {
		l, err := w.Leader(ctx)
		if err != nil || l.Token != ra.Term.Token {
			t.Fatalf("Leader = %+v, %v", l, err)
		}
	}
	after := redistest.CommandStats(t, cli)
	renewals := int(time.Since(start)/a.cfg.Timing.RenewInterval) + 2
	if d := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]; d > renewals {
		t.Fatalf("1000 Leader calls cost %d script calls (leader renewals allow %d)", d, renewals)
	}
	electortest.Resign(t, ra.Term)
}

func TestScriptCommandDenied(t *testing.T) {
	srv, cli := startRedis(t)
	if err := cli.Do(context.Background(), "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "noinfo", Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	e := newElectorWith(t, Config{Client: c, Candidate: elector.Candidate{Election: "perm", ID: "a", Timing: testTiming()}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.Campaign(ctx)
	var se *elector.StoreError
	if !errors.As(err, &se) || !se.Permanent {
		t.Fatalf("Campaign = %v, want a permanent StoreError", err)
	}
	if !strings.Contains(err.Error(), "ACL") {
		t.Fatalf("error does not point at the ACL: %v", err)
	}
	t.Logf("%v", err)
}

// TestCloseBoundedWhenCutOff: Close returns within its cleanup bound even
// when Redis cannot be reached, having ended the term.
func TestCloseBoundedWhenCutOff(t *testing.T) {
	srv, cli := startRedis(t)
	p := faultproxy.Start(t, srv.Addr())
	ctx := context.Background()
	a := newElector(t, p.Addr(), "closecut", "a")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")
	b := newElector(t, p.Addr(), "closecut", "b")
	cb := electortest.Campaign(ctx, b)
	waitQueued(t, cli, "closecut", 2)
	p.Cut()
	start := time.Now()
	for _, e := range []*Elector{a, b} {
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	if !errors.Is(ra.Term.Err(), elector.ErrClosed) {
		t.Fatalf("term.Err = %v", ra.Term.Err())
	}
	if r := <-cb; !errors.Is(r.Err, elector.ErrClosed) {
		t.Fatalf("waiting campaign returned %v after Close", r.Err)
	}
	if bound := 2 * (a.core.CleanupTimeout() + a.core.CallTimeout()); took > bound {
		t.Fatalf("Close took %s while cut off, want at most %s", took, bound)
	}
	t.Logf("two Closes while cut off took %s", took.Round(time.Millisecond))
}
