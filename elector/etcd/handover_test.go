package etcd

import (
	"context"
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
	cli := srv.Client(t)
	electortest.Eventually(t, 10*time.Second, "b queued", func() bool {
		g, err := cli.Get(ctx, DefaultPrefix+election+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && g.Count == 2
	})
	return a, b, ta, won
}

// TestResignHandsOverInOneWrite: a leader that resigns with a successor
// queued hands it the term in the transaction that deletes its own key;
// the successor leads on that revision without a write of its own, with a
// larger token, and the store's revision does not move after it.
func TestResignHandsOverInOneWrite(t *testing.T) {
	srv := testenv.StartEtcd(t)
	_, b, ta, won := handoverPair(t, srv, "handover")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ta.Resign(ctx); err != nil {
		t.Fatalf("a resign: %v", err)
	}
	tb, ok := <-won
	if !ok {
		t.FailNow()
	}
	if tb.Token <= ta.Token || tb.Leader.Since.IsZero() {
		t.Fatalf("b's term %+v after a's %+v: want a larger token and a start", tb.Leader, ta.Leader)
	}
	if n := b.handovers.Load(); n != 1 {
		t.Fatalf("b began %d terms on a hand-over, want 1", n)
	}
	g, err := srv.Client(t).Get(ctx, DefaultPrefix+"handover/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Kvs) != 1 || g.Kvs[0].CreateRevision != int64(tb.Token) {
		t.Fatalf("keys after the hand-over: %v; want b's alone", g.Kvs)
	}
	if g.Kvs[0].ModRevision != g.Header.Revision {
		t.Fatalf("the store moved on from the hand-over's revision %d to %d: b wrote after it", g.Kvs[0].ModRevision, g.Header.Revision)
	}
}

// TestHandOverRefusedClaims: a successor whose key a hand-over must not
// write (here one written by another tool under the same lease) is not
// handed the term: the leader revokes, and the successor claims it.
func TestHandOverRefusedClaims(t *testing.T) {
	srv := testenv.StartEtcd(t)
	_, b, ta, won := handoverPair(t, srv, "refused")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli := srv.Client(t)
	g, err := cli.Get(ctx, DefaultPrefix+"refused/", clientv3.WithLastCreate()...)
	if err != nil || len(g.Kvs) != 1 {
		t.Fatalf("b's key: %v, %v", g, err)
	}
	kv := g.Kvs[0]
	if _, err := cli.Put(ctx, string(kv.Key), "not electd's", clientv3.WithLease(clientv3.LeaseID(kv.Lease))); err != nil {
		t.Fatal(err)
	}
	if err := ta.Resign(ctx); err != nil {
		t.Fatalf("a resign: %v", err)
	}
	tb, ok := <-won
	if !ok {
		t.FailNow()
	}
	if tb.Token <= ta.Token || b.handovers.Load() != 0 {
		t.Fatalf("b's term %+v after a's %+v, %d hand-overs; want a larger token, claimed", tb.Leader, ta.Leader, b.handovers.Load())
	}
}
