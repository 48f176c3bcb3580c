package etcd_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/etcd"
	"github.com/electd/electd/internal/testenv"
)

// TestObserverShowsLeadersSince: an observer publishes a new term once,
// with the leader's own start time (what its child gets as
// ELECTD_LEADER_SINCE), although it sees the leader's key before the
// leader has written that time into it. A head whose key never gets it
// (its write failed) is published all the same, one opTimeout after it was
// first seen, with that moment.
func TestObserverShowsLeadersSince(t *testing.T) {
	srv := testenv.StartEtcd(t)
	h := &harness{srv: srv}
	const ttl = 2 * time.Second // opTimeout: max(ttl/5, 1 s) = 1 s
	mk := func(id string) elector.Locker {
		return h.New(t, electortest.Candidate{StoreAddr: srv.Endpoint(), Candidate: elector.Candidate{
			Election: "since", ID: id, Timing: timingOf(ttl)}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := mk("observer").Observe(ctx)
	next := func(within time.Duration) (elector.Leader, bool) {
		select {
		case l := <-seen:
			return l, true
		case <-time.After(within):
			return elector.Leader{}, false
		}
	}
	if l, ok := next(10 * time.Second); !ok || !l.IsZero() {
		t.Fatalf("first value %+v (%v), want no leader", l, ok)
	}

	for _, id := range []string{"a", "b"} {
		term, err := mk(id).Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := next(5 * time.Second)
		if !ok || l.ID != id || l.Token != term.Token {
			t.Fatalf("observer published %+v (%v), want %s's term %d", l, ok, id, term.Token)
		}
		if !l.Since.Equal(term.Leader.Since) {
			t.Errorf("observer published %s's term with since %s, the leader's is %s (off by %s)",
				id, l.Since.Format(time.RFC3339Nano), term.Leader.Since.Format(time.RFC3339Nano), l.Since.Sub(term.Leader.Since))
		}
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if l, ok := next(5 * time.Second); !ok || !l.IsZero() {
			t.Fatalf("after %s resigned the observer published %+v (%v), want no leader", id, l, ok)
		}
	}

	// A head that never writes its start: a key as a waiting candidate's,
	// alone in the election.
	cli := srv.Client(t)
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	put := time.Now()
	if _, err := cli.Put(ctx, etcd.DefaultPrefix+"since/mute", `{"id":"mute"}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	l, ok := next(5 * time.Second)
	at := time.Now()
	if !ok || l.ID != "mute" {
		t.Fatalf("observer published %+v (%v), want the head that wrote no start", l, ok)
	}
	if waited := at.Sub(put); waited < 900*time.Millisecond {
		t.Errorf("a head without a start was published %s after its key, want after about opTimeout (1 s)", waited)
	}
	if l.Since.Before(put) || l.Since.After(put.Add(900*time.Millisecond)) {
		t.Errorf("since %s for a head first seen just after %s: want the moment it was first seen", l.Since, put)
	}
	t.Logf("a head without a start was published %s after its key was put", at.Sub(put))
}
