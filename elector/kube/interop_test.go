package kube_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// goElector is a client-go LeaderElector on the same Lease, and when it
// led.
type goElector struct {
	mu             sync.Mutex
	started, ended time.Time
	cancel         context.CancelFunc
	done           chan struct{}
}

func (g *goElector) times() (started, ended time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started, g.ended
}

// startGo runs a client-go elector with a 2 s lease on the Lease named
// election until the test ends.
func startGo(t testing.TB, k *testenv.Kube, election, id string, releaseOnCancel bool) *goElector {
	t.Helper()
	g := runGo(t, k, election, id, releaseOnCancel)
	t.Cleanup(g.stop)
	return g
}

// runGo runs a client-go elector with a 2 s lease on the Lease named lease
// until stop.
func runGo(t testing.TB, k *testenv.Kube, lease, id string, releaseOnCancel bool) *goElector {
	t.Helper()
	return runGoOn(t, k.Client(t).CoordinationV1(), lease, id, 2*time.Second, 1500*time.Millisecond, 200*time.Millisecond, releaseOnCancel)
}

// runGoOn runs a client-go elector through leases on the Lease named lease,
// with the given lease duration, renew deadline and retry period, until
// stop.
func runGoOn(t testing.TB, leases coordv1.LeasesGetter, lease, id string, dur, deadline, retry time.Duration, releaseOnCancel bool) *goElector {
	t.Helper()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: lease, Namespace: namespace},
		Client:     leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	g := &goElector{done: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: dur, RenewDeadline: deadline, RetryPeriod: retry,
		ReleaseOnCancel: releaseOnCancel, Name: id,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { g.mu.Lock(); g.started = time.Now(); g.mu.Unlock() },
			OnStoppedLeading: func() { g.mu.Lock(); g.ended = time.Now(); g.mu.Unlock() },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go func() { defer close(g.done); le.Run(ctx) }()
	return g
}

// leading reports whether the client-go elector has started leading.
func (g *goElector) leading() bool { s, _ := g.times(); return !s.IsZero() }

// stop ends the client-go elector and waits for its Run to return.
func (g *goElector) stop() { g.cancel(); <-g.done }

// renewedAt is the Lease's renewTime and holder as the API server has them.
func renewedAt(t *testing.T, k *testenv.Kube, election string) (time.Time, string) {
	t.Helper()
	l, err := k.Client(t).CoordinationV1().Leases(namespace).Get(context.Background(), election, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the Lease: %v", err)
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return l.Spec.RenewTime.Time, holder
}

// TestClientGoWaitsForElectd: a client-go elector on electd's Lease does
// not lead while electd holds it, through several renewals, and leads
// once electd resigns, after electd's term ended.
func TestClientGoWaitsForElectd(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	el := "interop-a"
	a := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{Election: el, ID: "a", Timing: elector.Timing{TTL: 2 * time.Second}}})
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	g := startGo(t, k, el, "client-go", true)
	since := time.Now()
	electortest.Eventually(t, 15*time.Second, "electd renewing for two lease durations beside client-go", func() bool {
		return ra.Term.ValidUntil().After(since.Add(4 * time.Second))
	})
	if started, _ := g.times(); !started.IsZero() {
		t.Fatalf("client-go led at %s while electd held the Lease (valid until %s)", started.Format(time.StampMilli), ra.Term.ValidUntil().Format(time.StampMilli))
	}
	if _, holder := renewedAt(t, k, el); holder != "a" {
		t.Fatalf("the Lease names %q, want a", holder)
	}
	electortest.Resign(t, ra.Term)
	ended := time.Now()
	electortest.Eventually(t, 10*time.Second, "client-go leading after electd resigned", func() bool {
		started, _ := g.times()
		return !started.IsZero()
	})
	started, _ := g.times()
	if end := ra.Term.ValidUntil(); !started.After(end) {
		t.Fatalf("client-go led at %s, before electd's term ended at %s", started.Format(time.StampMilli), end.Format(time.StampMilli))
	}
	t.Logf("client-go led %s after electd resigned (it retries every 200 ms)", started.Sub(ended).Round(time.Millisecond))
}

// TestElectdWaitsForClientGo: electd does not lead while a client-go
// elector holds the Lease; it takes it at once when client-go releases
// it, and, when a client-go holder stops without releasing, only after
// the Lease stood unchanged for its duration.
func TestElectdWaitsForClientGo(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	tests := []struct {
		name    string
		release bool
	}{
		{name: "client-go releases", release: true},
		{name: "client-go stops without releasing", release: false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			el := []string{"interop-b", "interop-c"}[i]
			g := startGo(t, k, el, "client-go", tc.release)
			electortest.Eventually(t, 10*time.Second, "client-go leading", func() bool { s, _ := g.times(); return !s.IsZero() })
			b := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{Election: el, ID: "b", Timing: elector.Timing{TTL: 2 * time.Second}}})
			cb := electortest.Campaign(ctx, b)
			first, _ := renewedAt(t, k, el)
			electortest.Eventually(t, 15*time.Second, "client-go renewing for two lease durations beside electd", func() bool {
				r, _ := renewedAt(t, k, el)
				return r.After(first.Add(4 * time.Second))
			})
			electortest.StillWaiting(t, cb, "b")
			g.stop()
			last, holder := renewedAt(t, k, el)
			_, stopped := g.times()
			rb := electortest.MustLead(t, cb, 10*time.Second, "b")
			t.Logf("electd led %s after client-go stopped", rb.At.Sub(stopped).Round(time.Millisecond))
			if rb.At.Before(stopped) {
				t.Fatalf("electd led at %s, before client-go stopped leading at %s", rb.At.Format(time.StampMilli), stopped.Format(time.StampMilli))
			}
			if !tc.release {
				if holder != "client-go" {
					t.Fatalf("the stopped elector left holder %q, want client-go", holder)
				}
				// client-go's last renewal holds the Lease for 2 s.
				if rb.At.Before(last.Add(2 * time.Second)) {
					t.Fatalf("electd led at %s, %s after client-go's last renewal: before its 2 s lease ran out",
						rb.At.Format(time.StampMilli), rb.At.Sub(last).Round(time.Millisecond))
				}
			}
			electortest.Resign(t, rb.Term)
		})
	}
}

// span is one term of either kind of elector.
type span struct {
	who        string
	start, end time.Time
}

// TestContendingWithClientGo: two electd candidates and a client-go
// elector contend for one Lease, each holding it briefly and letting go:
// no two of their terms overlap, and electd's tokens grow.
func TestContendingWithClientGo(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	const el, rounds = "interop-mix", 4
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var (
		mu    sync.Mutex
		spans []span
		last  uint64
	)
	record := func(s span) { mu.Lock(); spans = append(spans, s); mu.Unlock() }
	var wg sync.WaitGroup
	for _, id := range []string{"a", "b"} {
		e := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{Election: el, ID: id, Timing: elector.Timing{TTL: 2 * time.Second}}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				term, err := e.Campaign(ctx)
				if err != nil {
					t.Errorf("%s: campaign: %v", id, err)
					return
				}
				start := time.Now()
				mu.Lock()
				if term.Token <= last {
					t.Errorf("%s: token %d after %d", id, term.Token, last)
				}
				last = term.Token
				mu.Unlock()
				time.Sleep(300 * time.Millisecond) // the term's work
				if err := term.Resign(ctx); err != nil {
					t.Errorf("%s: resign: %v", id, err)
				}
				record(span{id, start, term.ValidUntil()})
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		cs := k.Client(t)
		for range rounds {
			lctx, lcancel := context.WithCancel(ctx)
			var s span
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: el, Namespace: namespace},
					Client: cs.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: "client-go"}},
				LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
				ReleaseOnCancel: true, Name: "client-go",
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(context.Context) {
						s = span{"client-go", time.Now(), time.Time{}}
						time.Sleep(300 * time.Millisecond) // the term's work
						s.end = time.Now()                 // it stops before it lets go
						lcancel()
					},
					OnStoppedLeading: func() {},
				},
			})
			if err != nil {
				t.Error(err)
				lcancel()
				return
			}
			le.Run(lctx) // returns after the release
			lcancel()
			if ctx.Err() != nil {
				return
			}
			if !s.start.IsZero() {
				record(s)
			}
		}
	}()
	wg.Wait()
	slices.SortFunc(spans, func(x, y span) int { return x.start.Compare(y.start) })
	kinds := map[string]int{}
	for i, s := range spans {
		kinds[s.who]++
		if i > 0 && !spans[i-1].end.Before(s.start) {
			t.Errorf("%s's term (until %s) overlaps %s's (from %s)", spans[i-1].who, spans[i-1].end.Format(time.StampMilli), s.who, s.start.Format(time.StampMilli))
		}
	}
	t.Logf("%d terms: %v", len(spans), kinds)
	if kinds["client-go"] == 0 || kinds["a"]+kinds["b"] == 0 {
		t.Fatalf("one kind of elector never led: %v", kinds)
	}
}
