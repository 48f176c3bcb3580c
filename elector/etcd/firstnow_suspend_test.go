package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// renewSignal tells the test each time a renewal of the candidate counted.
type renewSignal struct {
	elector.NopInstrument
	ch chan struct{}
}

func (r *renewSignal) Renewed(time.Duration) {
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// TestSuspendedSuccessorWhoseKeyIsGone: a successor whose leader resigned
// while its host slept (monotonic clock stopped, network silent) wakes
// after its key expired on the store and the next waiter leads. It sees
// the deletion of the key ahead of it at revision R; read at R, its key
// was the first, but at the store's present it is gone and another
// candidate holds a term with a larger token: it must not lead, and
// queues again (its claim's transaction would have refused too). Found by
// the adversarial review of the hand-over (8c884fd), whose successor read
// its key at R; the read-at-R rule of 14c6158 failed it the same way.
func TestSuspendedSuccessorWhoseKeyIsGone(t *testing.T) {
	srv := testenv.StartEtcd(t)
	cli := srv.Client(t)
	const election = "successor-suspended"
	pfx := DefaultPrefix + election + "/"
	ttl := elector.Timing{TTL: 2 * time.Second}

	a := electortest.Dial(t, Backend, electortest.Candidate{StoreAddr: srv.Endpoint(), Candidate: elector.Candidate{
		Election: election, ID: "a", Timing: ttl}}).(*Elector)
	c := electortest.Dial(t, Backend, electortest.Candidate{StoreAddr: srv.Endpoint(), Candidate: elector.Candidate{
		Election: election, ID: "c", Timing: ttl}}).(*Elector)
	// b's host: every byte through a proxy, its clock a pumped fake.
	px := faultproxy.Start(t, srv.Endpoint())
	p := startPump(t)
	sig := &renewSignal{ch: make(chan struct{}, 1)}
	b := electortest.Dial(t, Backend, electortest.Candidate{StoreAddr: px.Addr(), Candidate: elector.Candidate{
		Election: election, ID: "b", Timing: ttl, Clock: p.fake, Instrument: sig}}).(*Elector)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("a campaign: %v", err)
	}
	queued := func(n int64) {
		electortest.Eventually(t, 10*time.Second, "queued", func() bool {
			g, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err == nil && g.Count == n
		})
	}
	type result struct {
		term *elector.Term
		err  error
		at   time.Time
	}
	bres, cres := make(chan result, 1), make(chan result, 1)
	go func() { tm, err := b.Campaign(ctx); bres <- result{tm, err, time.Now()} }()
	queued(2)
	g, err := cli.Get(ctx, pfx, clientv3.WithLastCreate()...)
	if err != nil || len(g.Kvs) != 1 {
		t.Fatalf("b's key: %v %v", g, err)
	}
	bkey, brev := string(g.Kvs[0].Key), g.Kvs[0].CreateRevision
	go func() { tm, err := c.Campaign(ctx); cres <- result{tm, err, time.Now()} }()
	queued(3)

	// b's host sleeps right after one of its renewals counted (none in flight).
	for range 2 {
		select {
		case <-sig.ch:
		case <-ctx.Done():
			t.Fatal("b never renewed")
		}
	}
	px.Cut()
	p.pause()
	sleptAt := time.Now()

	// a resigns while b's lease still lives on the store.
	if err := ta.Resign(ctx); err != nil {
		t.Fatalf("a resign: %v", err)
	}

	// b's lease expires on the store; c leads.
	var tc *elector.Term
	select {
	case r := <-cres:
		if r.err != nil {
			t.Fatalf("c campaign: %v", r.err)
		}
		tc = r.term
	case <-time.After(20 * time.Second):
		t.Fatal("c never led after b's lease lapsed")
	}
	if g, err := cli.Get(ctx, bkey); err != nil || len(g.Kvs) != 0 {
		t.Fatalf("b's key still there while c leads: %v %v", g, err)
	}
	t.Logf("b's key gone and c leads (token %d) %s after b's host slept", tc.Token, time.Since(sleptAt).Round(time.Millisecond))

	// b's host wakes.
	px.Heal()
	p.resume()
	woke := time.Now()

	// Correct: b finds its key gone and queues again (a new key, behind c).
	requeued := func() bool {
		g, err := cli.Get(ctx, pfx, clientv3.WithPrefix())
		if err != nil {
			return false
		}
		for _, kv := range g.Kvs {
			if string(kv.Key) != bkey && decodeValue(kv.Value).ID == "b" {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case r := <-bres:
			if r.err != nil {
				t.Fatalf("b campaign: %v", r.err)
			}
			tb := r.term
			cErr := tc.Err()
			t.Errorf("SAFETY: b's Campaign returned a term (token %d, key created at %d, err %v, %s of its deadline left on its clock, Suspended %s) %s after its host woke, "+
				"while its key was gone from the store and c held a term with the greater token %d (c's term err: %v)",
				tb.Token, brev, tb.Err(), tb.ValidUntil().Sub(p.fake.Now()).Round(time.Millisecond), tb.Suspended().Round(time.Millisecond),
				r.at.Sub(woke).Round(time.Millisecond), tc.Token, cErr)
			return
		default:
		}
		if requeued() {
			return // b queued again: it did not lead on a key that is gone
		}
		if time.Now().After(deadline) {
			t.Fatal("b neither led nor queued again within 10 s of waking")
		}
		time.Sleep(10 * time.Millisecond) // polling the store and b's result, not synchronising
	}
}
