package kube

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// The fencing-token tests: each builds a history in which an electd term
// follows another electd term, and checks that its token is above.

const tokenNS = "default"

// hookedLeases is a Leases client whose requests pass through hooks: what
// a slow network or a lagging API server does to one candidate's requests
// and watches.
type hookedLeases struct {
	LeasesGetter
	// create, if set, runs before a Create of a Lease is sent (it may
	// block, as a request in flight does); an error is the request's.
	create func(ctx context.Context, l *coordinationv1.Lease) error
	// lag, if set, decides which watch events reach the candidate.
	lag *watchLag
}

func (h *hookedLeases) Leases(ns string) LeaseClient {
	return &hookedLease{LeaseClient: h.LeasesGetter.Leases(ns), h: h}
}

type hookedLease struct {
	LeaseClient
	h *hookedLeases
}

func (l *hookedLease) Create(ctx context.Context, obj *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if l.h.create != nil {
		if err := l.h.create(ctx, obj); err != nil {
			return nil, err
		}
	}
	return l.LeaseClient.Create(ctx, obj, opts)
}

func (l *hookedLease) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.LeaseClient.Watch(ctx, opts)
	if err != nil || l.h.lag == nil {
		return w, err
	}
	return l.h.lag.wrap(w), nil
}

// watchLag holds back every watch event of one candidate after a point:
// once trigger has matched an event, only events at or below that event's
// resourceVersion are delivered, on every watch of the candidate. It is a
// watch that lags (an API server whose watch cache is behind its etcd),
// while the candidate's writes still go through.
type watchLag struct {
	trigger func(watch.Event) bool
	mu      sync.Mutex
	upTo    uint64 // 0: not lagging yet
	held    int
}

func (g *watchLag) frozenAt() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.upTo
}

func (g *watchLag) wrap(w watch.Interface) watch.Interface {
	out := make(chan watch.Event)
	lw := &lagged{Interface: w, out: out, stop: make(chan struct{})}
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			var n uint64
			if o, ok := ev.Object.(metav1.Object); ok {
				n, _ = strconv.ParseUint(o.GetResourceVersion(), 10, 64)
			}
			g.mu.Lock()
			if g.upTo == 0 && g.trigger != nil && g.trigger(ev) {
				g.upTo = n
			}
			deliver := g.upTo == 0 || (n != 0 && n <= g.upTo)
			if !deliver {
				g.held++
			}
			g.mu.Unlock()
			if !deliver {
				continue
			}
			select {
			case out <- ev:
			case <-lw.stop:
				return
			}
		}
	}()
	return lw
}

type lagged struct {
	watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (l *lagged) ResultChan() <-chan watch.Event { return l.out }
func (l *lagged) Stop() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.Interface.Stop()
}

// tokenCandidate is an Elector of election on k, as the admin, its Leases
// client wrapped by hook (if not nil).
func tokenCandidate(t *testing.T, k *testenv.Kube, election, id string, ttl time.Duration, hook *hookedLeases) *Elector {
	t.Helper()
	leases, _, err := Clients(k.Config(k.AdminToken()))
	if err != nil {
		t.Fatal(err)
	}
	if hook != nil {
		hook.LeasesGetter = leases
		leases = hook
	}
	e, err := New(Config{Candidate: elector.Candidate{Election: election, ID: id, Timing: elector.Timing{TTL: ttl}, Logger: electortest.Logger()},
		Leases: leases, Namespace: tokenNS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// bumpRevision writes n unrelated Leases in the namespace: the store's
// revision grows, as it does with every write of any other Lease there.
func bumpRevision(t *testing.T, k *testenv.Kube, prefix string, n int) {
	t.Helper()
	leases := k.Client(t).CoordinationV1().Leases(tokenNS)
	for i := range n {
		_, err := leases.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + strconv.Itoa(i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func deleteLease(t *testing.T, k *testenv.Kube, name string) {
	t.Helper()
	if err := k.Client(t).CoordinationV1().Leases(tokenNS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the Lease: %v", err)
	}
}

func waitEnded(t *testing.T, term *elector.Term, who string) {
	t.Helper()
	select {
	case <-term.Done():
		t.Logf("%s's term (token %d) ended: %v", who, term.Token, term.Err())
	case <-time.After(10 * time.Second):
		t.Fatalf("%s's term did not end after its Lease was deleted", who)
	}
}

// TestTokenAboveATermThatBeganWhileACreateWasInFlight: B finds the
// Lease absent (TryCampaign's fresh list) and sends a Create with a token
// from that list; while the request is in flight (a slow network, a busy
// API server), A takes the Lease and leads, and the Lease is deleted by
// hand. B's Create then lands on an absent Lease, and B leads: after A,
// so B's token must be above A's.
func TestTokenAboveATermThatBeganWhileACreateWasInFlight(t *testing.T) {
	k := testenv.StartKube(t)
	const el = "token-inflight"
	const ttl = 10 * time.Second // requests may take up to ttl/5
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b := tokenCandidate(t, k, el, "b", ttl, &hookedLeases{create: func(ctx context.Context, l *coordinationv1.Lease) error {
		if l.Name != el {
			return nil
		}
		once.Do(func() { close(arrived) })
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	type result struct {
		term *elector.Term
		err  error
	}
	bres := make(chan result, 1)
	go func() {
		term, err := b.TryCampaign(context.Background())
		bres <- result{term, err}
	}()
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("b sent no Create")
	}
	// Other Leases of the namespace are written meanwhile.
	bumpRevision(t, k, "other", 5)
	a := tokenCandidate(t, k, el, "a", ttl, nil)
	ta, err := a.TryCampaign(context.Background())
	if err != nil {
		t.Fatalf("a: %v", err)
	}
	t.Logf("a leads with token %d", ta.Token)
	deleteLease(t, k, el)
	waitEnded(t, ta, "a")
	close(release)
	r := <-bres
	if r.err != nil {
		t.Fatalf("b: %v", r.err)
	}
	t.Logf("b leads with token %d, after a's term (token %d)", r.term.Token, ta.Token)
	if r.term.Token <= ta.Token {
		t.Errorf("b's term began after a's, but its token %d is not above a's %d", r.term.Token, ta.Token)
	}
}

// TestTokenAboveATermItsLaggingViewMissed: b waits in line behind a with
// the Lease deleted (by hand, under its holder x). a takes the Lease at
// once (a Create), leads, and the Lease is deleted again. b's watches lag
// from the first deletion on (its API server's watch cache is behind):
// to b, a's ticket stops being renewed and the Lease is still absent, so
// after one ttl b removes a's ticket and creates the Lease. b's term
// began after a's, so its token must be above a's. (Both tokens are one
// more than the deletion's version here: a repeat. Writes that a's view
// sees before its Create would make b's token lower.)
func TestTokenAboveATermItsLaggingViewMissed(t *testing.T) {
	k := testenv.StartKube(t)
	const el = "token-lag"
	const ttl = 5 * time.Second
	ctx := context.Background()
	x := tokenCandidate(t, k, el, "x", ttl, nil)
	tx, err := x.TryCampaign(ctx)
	if err != nil {
		t.Fatalf("x: %v", err)
	}
	a := tokenCandidate(t, k, el, "a", ttl, nil)
	ca := electortest.Campaign(ctx, a)
	electortest.Eventually(t, 10*time.Second, "a in line", func() bool { st, _ := a.view.snapshot(); return len(st.tickets) == 1 })
	lag := &watchLag{trigger: func(ev watch.Event) bool {
		l, ok := ev.Object.(*coordinationv1.Lease)
		return ok && ev.Type == watch.Deleted && l.Name == el
	}}
	b := tokenCandidate(t, k, el, "b", ttl, &hookedLeases{lag: lag})
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b in line behind a", func() bool { st, _ := b.view.snapshot(); return len(st.tickets) == 2 })
	deleteLease(t, k, el)
	waitEnded(t, tx, "x")
	ra := electortest.MustLead(t, ca, 10*time.Second, "a")
	t.Logf("a leads with token %d; b's view lags from version %d", ra.Term.Token, lag.frozenAt())
	deleteLease(t, k, el)
	waitEnded(t, ra.Term, "a")
	rb := electortest.MustLead(t, cb, 4*ttl, "b")
	lag.mu.Lock()
	held := lag.held
	lag.mu.Unlock()
	t.Logf("b leads with token %d (%d events held back from it)", rb.Term.Token, held)
	if rb.Term.Token <= ra.Term.Token {
		t.Errorf("b's term began after a's, but its token %d is not above a's %d", rb.Term.Token, ra.Term.Token)
	}
}

// TestTokenAboveAReleasedTermsToken: someone raises the token on the
// Lease by hand (kubectl annotate electd.io/fencing-token=…), which ends
// a's term; b, waiting, saw the raised token and leads above it, then
// resigns with nobody in line (the Lease released, its annotations left).
// c, started afterwards, takes the released Lease: its term follows b's,
// so its token must be above b's.
func TestTokenAboveAReleasedTermsToken(t *testing.T) {
	k := testenv.StartKube(t)
	const el = "token-released"
	const ttl = 2 * time.Second
	ctx := context.Background()
	a := tokenCandidate(t, k, el, "a", ttl, nil)
	ta, err := a.TryCampaign(ctx)
	if err != nil {
		t.Fatalf("a: %v", err)
	}
	b := tokenCandidate(t, k, el, "b", ttl, nil)
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b in line", func() bool { st, _ := b.view.snapshot(); return len(st.tickets) == 1 })
	leases := k.Client(t).CoordinationV1().Leases(tokenNS)
	// A hand edit, tried again while a's renewals come between.
	electortest.Eventually(t, 5*time.Second, "the token raised", func() bool {
		l, err := leases.Get(ctx, el, metav1.GetOptions{})
		if err != nil {
			return false
		}
		l.Annotations[annToken] = "1000000000"
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err == nil
	})
	waitEnded(t, ta, "a")
	rb := electortest.MustLead(t, cb, 10*time.Second, "b")
	t.Logf("b leads with token %d", rb.Term.Token)
	electortest.Resign(t, rb.Term)
	c := tokenCandidate(t, k, el, "c", ttl, nil)
	tc, err := c.TryCampaign(ctx)
	if err != nil {
		t.Fatalf("c: %v", err)
	}
	t.Logf("c leads with token %d, after b's term (token %d)", tc.Token, rb.Term.Token)
	if tc.Token <= rb.Term.Token {
		t.Errorf("c's term began after b's, but its token %d is not above b's %d", tc.Token, rb.Term.Token)
	}
}
