package etcd_test

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// TestCutOffBeatsSessionDone cuts two leaders off the store at the same
// instant: one of ours, and one that relies on etcd's concurrency.Session
// the way `etcdctl elect` and most etcd users do. Ours must have ended its
// term, with its ValidUntil passed, before its successor was granted one.
// The library's Session.Done must be shown insufficient: it closes no
// earlier than a child's stop budget before its successor is granted, so a
// child stopped on it would still be running when the next one starts.
func TestCutOffBeatsSessionDone(t *testing.T) {
	const (
		ttl        = 2 * time.Second
		stopBudget = time.Second // time a child is given to exit
	)
	srv := testenv.StartEtcd(t)
	h := &harness{srv: srv}
	proxy := faultproxy.Start(t, srv.Endpoint())
	ctx := context.Background()

	// Ours: a behind the proxy, b direct.
	a := h.New(t, electortest.Candidate{StoreAddr: proxy.Addr(), Candidate: elector.Candidate{Election: "cut", ID: "a", Timing: timingOf(ttl)}})
	b := h.New(t, electortest.Candidate{StoreAddr: srv.Endpoint(), Candidate: elector.Candidate{Election: "cut", ID: "b", Timing: timingOf(ttl)}})
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("a campaign: %v", err)
	}
	bWon := make(chan time.Time, 1)
	go func() {
		if _, err := b.Campaign(ctx); err == nil {
			bWon <- time.Now()
		}
	}()

	// The library's: l behind the same proxy, w direct.
	ls, err := concurrency.NewSession(testenv.EtcdClient(t, proxy.Addr()), concurrency.WithTTL(int(ttl/time.Second)))
	if err != nil {
		t.Fatalf("library session: %v", err)
	}
	if err := concurrency.NewElection(ls, "/lib/cut").Campaign(ctx, "l"); err != nil {
		t.Fatalf("library campaign: %v", err)
	}
	ws, err := concurrency.NewSession(testenv.EtcdClient(t, srv.Endpoint()), concurrency.WithTTL(int(ttl/time.Second)))
	if err != nil {
		t.Fatalf("library session: %v", err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	wWon := make(chan time.Time, 1)
	go func() {
		if err := concurrency.NewElection(ws, "/lib/cut").Campaign(ctx, "w"); err == nil {
			wWon <- time.Now()
		}
	}()
	electortest.Eventually(t, 5*time.Second, "both waiters queued", func() bool {
		return h.Queued(t, "cut") == 2 && countPrefix(t, srv, "/lib/cut/") == 2
	})

	aDone := make(chan time.Time, 1)
	go func() { <-ta.Done(); aDone <- time.Now() }()
	lDone := make(chan time.Time, 1)
	go func() { <-ls.Done(); lDone <- time.Now() }()

	cut := time.Now()
	proxy.Cut()
	at := func(ch <-chan time.Time, what string) time.Time {
		select {
		case v := <-ch:
			return v
		case <-time.After(10 * ttl):
			t.Fatalf("%s did not happen within %s of the cut", what, 10*ttl)
		}
		return time.Time{}
	}
	gB, gW := at(bWon, "b's grant"), at(wWon, "the library waiter's grant")
	dA, dL := at(aDone, "a's Done"), at(lDone, "the library Session.Done")
	vA := ta.ValidUntil()
	ms := func(x time.Time) time.Duration { return x.Sub(cut).Round(time.Millisecond) }
	t.Logf("ours:    a Done %s, a ValidUntil %s, b granted %s: stepped down %s before the grant",
		ms(dA), ms(vA), ms(gB), gB.Sub(vA).Round(time.Millisecond))
	t.Logf("library: Session.Done %s, successor granted %s: Session.Done came %s after the grant",
		ms(dL), ms(gW), dL.Sub(gW).Round(time.Millisecond))

	if !dA.Before(gB) || !vA.Before(gB) {
		t.Fatalf("our cut-off leader did not step down first: Done %s, ValidUntil %s, successor granted %s", ms(dA), ms(vA), ms(gB))
	}
	if dL.Before(gW.Add(-stopBudget)) {
		t.Fatalf("Session.Done closed %s before the successor's grant; expected it too late to stop a child within %s", gW.Sub(dL), stopBudget)
	}
	proxy.Heal()
}

func countPrefix(t testing.TB, srv *testenv.Etcd, pfx string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := srv.Client(t).Get(ctx, pfx, clientv3WithPrefixCount()...)
	if err != nil {
		t.Fatalf("count %s: %v", pfx, err)
	}
	return int(resp.Count)
}
