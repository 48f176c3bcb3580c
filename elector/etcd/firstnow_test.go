package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// handoverPair is a leader a and a waiter b queued behind it on srv.
func handoverPair(t *testing.T, srv *testenv.Etcd, election string) (a, b *Elector, ta *elector.Term, tb <-chan *elector.Term) {
	t.Helper()
	cand := func(id string) *Elector {
		return electortest.Dial(t, Backend, electortest.Candidate{StoreAddr: srv.Endpoint(), Candidate: elector.Candidate{
			Election: election, ID: id, Timing: elector.Timing{TTL: 5 * time.Second}}}).(*Elector)
	}
	a, b = cand("a"), cand("b")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("a campaign: %v", err)
	}
	won := make(chan *elector.Term, 1)
	go func() {
		term, err := b.Campaign(ctx)
		if err != nil {
			t.Errorf("b campaign: %v", err)
			close(won)
			return
		}
		won <- term
	}()
	// Queued, and past its claim: a resignation before b's claim would
	// have b claim an empty election instead of leading on the deletion.
	electortest.Eventually(t, 10*time.Second, "b watching a", func() bool { return b.watching.Load() > 0 })
	return a, b, ta, won
}

// TestSuccessorLeadsOnTheDeletion: a successor woken by its leader's
// resignation leads on the deletion's revision, read from the store's
// history, without a claim of its own: the resignation is the one write
// between the two terms. Its token is larger.
func TestSuccessorLeadsOnTheDeletion(t *testing.T) {
	srv := testenv.StartEtcd(t)
	_, b, ta, won := handoverPair(t, srv, "deletion")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ta.Resign(ctx); err != nil {
		t.Fatalf("a resign: %v", err)
	}
	tb, ok := <-won
	if !ok {
		t.FailNow()
	}
	if tb.Token <= ta.Token {
		t.Fatalf("b's term %+v after a's %+v: want a larger token", tb.Leader, ta.Leader)
	}
	if n := b.unclaimed.Load(); n != 1 {
		t.Fatalf("b began %d terms without a claim, want 1", n)
	}
	// Observers get the term's start from b's key, written after the term began.
	electortest.Eventually(t, 5*time.Second, "b's start of term on its key", func() bool {
		g, err := srv.Client(t).Get(ctx, DefaultPrefix+"deletion/", clientv3.WithPrefix())
		return err == nil && len(g.Kvs) == 1 && g.Kvs[0].CreateRevision == int64(tb.Token) &&
			decodeValue(g.Kvs[0].Value).Since.Equal(tb.Leader.Since.UTC().Round(0))
	})
}

// TestFirstNow: the rule a woken successor leads by without a claim, read
// against a real etcd. A leader a, and waiters x and b queued behind it:
// b is not the first while a's key or x's is there; it is once both are
// gone; and it is not once its own key is gone too.
func TestFirstNow(t *testing.T) {
	srv := testenv.StartEtcd(t)
	e := electortest.Dial(t, Backend, electortest.Candidate{StoreAddr: srv.Endpoint(), Candidate: elector.Candidate{
		Election: "first-now", ID: "b", Timing: elector.Timing{TTL: 5 * time.Second}}}).(*Elector)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	queue := func(id string) *session {
		s, err := e.newSession(ctx)
		if err != nil {
			t.Fatalf("%s's session: %v", id, err)
		}
		key := fmt.Sprintf("%s%x", e.pfx, int64(s.lease))
		rev, err := e.join(ctx, ctx, s, key)
		if err != nil {
			t.Fatalf("%s joins: %v", id, err)
		}
		s.key, s.rev = key, rev
		return s
	}
	a, x, b := queue("a"), queue("x"), queue("b")
	cli := srv.Client(t)
	for _, tc := range []struct {
		name   string
		revoke *session // before the check
		want   bool
	}{
		{"behind a and x", nil, false},
		{"x gone, a still first", x, false},
		{"a gone too", a, true},
		{"its own key gone", b, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.revoke != nil {
				if _, err := cli.Revoke(ctx, tc.revoke.lease); err != nil {
					t.Fatal(err)
				}
			}
			rev, got := e.firstNow(ctx, b)
			if got != tc.want {
				t.Fatalf("firstNow(b) = %v at %d, want %v (a %d, x %d, b %d created)", got, rev, tc.want, a.rev, x.rev, b.rev)
			}
		})
	}
}
