package kube_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// goElectorVia is a client-go LeaderElector dialing addr (a fault proxy),
// with the given lease duration, renew deadline and retry period.
func goElectorVia(t *testing.T, k *testenv.Kube, addr, election, id string, dur, deadline, retry time.Duration) *goElector {
	t.Helper()
	rc := k.Config(k.AdminToken())
	rc.Host = "https://" + addr
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	g := runGoOn(t, cs.CoordinationV1(), election, id, dur, deadline, retry, false)
	t.Cleanup(g.stop)
	return g
}

// TestReleasedMarkLeftByClientGoTermIsNotElectdsRelease: electd's
// release marks the Lease (electd.io/released) and a client-go elector
// takes it at once. client-go's LeaseLock updates only the spec, so the
// mark stays on the Lease through the whole client-go term. When that
// client-go holder is cut off and someone clears its holder by hand
// (kubectl edit, the case rule 3 times for the last holder's duration),
// the cleared Lease carries the stale mark, looks like electd's own
// release, and an electd waiter takes it at once while the client-go
// holder still leads (until its RenewDeadline) and before the client-go
// lease duration the rule promises to wait has passed.
func TestReleasedMarkLeftByClientGoTermIsNotElectdsRelease(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	el := "adv2-stale-released"
	leases := k.Client(t).CoordinationV1().Leases(namespace)

	a := candidateAt(t, h, h.Addr(), el, "a", elector.Timing{TTL: 2 * time.Second})
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	electortest.Resign(t, ra.Term) // nobody in line: release, marked

	pg := faultproxy.Start(t, h.Addr())
	g := goElectorVia(t, k, pg.Addr(), el, "client-go", 6*time.Second, 4*time.Second, 200*time.Millisecond)
	electortest.Eventually(t, 10*time.Second, "client-go leading", func() bool { s, _ := g.times(); return !s.IsZero() })

	b := candidateAt(t, h, h.Addr(), el, "b", elector.Timing{TTL: 2 * time.Second})
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b's ticket", func() bool { return tickets(t, k, el)["b"] })
	time.Sleep(500 * time.Millisecond) // b's view shows client-go renewing
	electortest.StillWaiting(t, cb, "b")

	l, err := leases.Get(ctx, el, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("during client-go's term the Lease names %q and still carries electd.io/released=%q",
		holder(l), l.Annotations["electd.io/released"])

	// client-go is cut off right after a renewal; then kubectl clears the holder.
	electortest.Eventually(t, 5*time.Second, "a fresh client-go renewal", func() bool {
		r, _ := renewedAt(t, k, el)
		return time.Since(r) < 50*time.Millisecond
	})
	pg.Cut()
	lastRenew, _ := renewedAt(t, k, el)
	editLease(t, leases, el, "the holder (cleared)", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil })
	cleared := time.Now()
	rb := electortest.MustLead(t, cb, 15*time.Second, "b")
	electortest.Eventually(t, 10*time.Second, "client-go stopping", func() bool { _, e := g.times(); return !e.IsZero() })
	_, gEnded := g.times()
	t.Logf("client-go's last renewal %s, cleared by hand %s, b led %s, client-go stopped leading %s",
		lastRenew.Format("15:04:05.000"), cleared.Format("15:04:05.000"), rb.At.Format("15:04:05.000"), gEnded.Format("15:04:05.000"))
	if promised := cleared.Add(6 * time.Second); rb.At.Before(promised) {
		t.Errorf("b took the cleared Lease %s after the clear, before client-go's 6 s duration (rule 3 promises to wait it out, %s more)",
			rb.At.Sub(cleared).Round(time.Millisecond), promised.Sub(rb.At).Round(time.Millisecond))
	}
	if rb.At.Before(gEnded) {
		t.Errorf("two leaders at once: b led at %s while client-go led until %s: overlap %s",
			rb.At.Format("15:04:05.000"), gEnded.Format("15:04:05.000"), gEnded.Sub(rb.At).Round(time.Millisecond))
	}
	pg.Heal()
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// lagLeases delays every watch event its Watch delivers by lag: a watch
// that lags behind quorum reads, as the API server's watch cache may.
type lagLeases struct {
	kube.LeasesGetter
	lag time.Duration
}

func (g lagLeases) Leases(ns string) kube.LeaseClient {
	return lagLease{LeaseClient: g.LeasesGetter.Leases(ns), lag: g.lag}
}

type lagLease struct {
	kube.LeaseClient
	lag time.Duration
}

func (l lagLease) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := l.LeaseClient.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := make(chan watch.Event)
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			due := time.Now().Add(l.lag)
			select {
			case <-time.After(time.Until(due)):
			case <-stop:
				return
			}
			select {
			case out <- ev:
			case <-stop:
				return
			}
		}
	}()
	return &lagWatch{w: w, out: out, stop: func() { once.Do(func() { close(stop); w.Stop() }) }}, nil
}

type lagWatch struct {
	w    watch.Interface
	out  chan watch.Event
	stop func()
}

func (w *lagWatch) Stop()                          { w.stop() }
func (w *lagWatch) ResultChan() <-chan watch.Event { return w.out }

// TestTryCampaignWaitsOutDeletedLeaseItsWatchHasNotShown: the Lease is
// deleted by hand (kubectl delete lease) while its holder is cut off.
// A candidate that saw the holder, and whose watch has not yet shown the
// deletion (it lags the quorum read by 1 s), calls TryCampaign: fresh
// reads the Lease again, finds it missing and drops the view's Lease
// without timing its last holder (state.gone is only set by the view's
// own vanish), so free says "never seen held" and the candidate creates
// and takes the Lease at once, inside the cut-off holder's term.
func TestTryCampaignWaitsOutDeletedLeaseItsWatchHasNotShown(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	el := "adv2-try-deleted"
	leases := k.Client(t).CoordinationV1().Leases(namespace)

	pa, ra := leaderBehindProxy(t, h, el, elector.Timing{TTL: 10 * time.Second})

	rc := k.Config(k.AdminToken())
	lg, _, err := kube.Clients(rc)
	if err != nil {
		t.Fatal(err)
	}
	cand := elector.Candidate{Election: el, ID: "b", Timing: elector.Timing{TTL: 10 * time.Second}, Logger: electortest.Logger()}
	b, err := kube.New(kube.Config{Candidate: cand, Leases: lagLeases{LeasesGetter: lg, lag: time.Second}, Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if _, err := b.TryCampaign(ctx); !errors.Is(err, elector.ErrBusy) {
		t.Fatalf("b's first TryCampaign while a leads: %v, want ErrBusy", err)
	}
	time.Sleep(2 * time.Second) // b's view has shown a holding the Lease

	pa.Cut()
	if err := leases.Delete(ctx, el, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the Lease: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	term, err := b.TryCampaign(ctx)
	at := time.Now()
	if err != nil {
		t.Logf("b's TryCampaign after the deletion: %v", err)
		pa.Heal()
		return
	}
	checkNoOverlap(t, "a", ra.Term, "b", at)
	_ = term
	pa.Heal()
}

// TestClientGoWaitsOutElectdLeaderWithPreferredHolder: rule 1 counts a
// renewal from the first write of the record client-go can tell apart,
// comparing goRecord strings; goRecord formats spec.strategy and
// spec.preferredHolder, which are pointers, with fmt.Sprint: their
// addresses, not their values. Once a Lease carries either (set by hand,
// kubectl patch, or by coordinated leader election), every renewal looks
// like a new record to electd, so each renewal counts from its own send
// time, while client-go (which compares the JSON of the values) still
// times the term from the first renewal of that second. The leader is
// cut off after a renewal sent late in its second: client-go takes the
// Lease before the leader's ValidUntil.
func TestClientGoWaitsOutElectdLeaderWithPreferredHolder(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	el := "adv2-preferred-holder"
	cs := k.Client(t)
	leases := cs.CoordinationV1().Leases(namespace)
	pa, ra := leaderBehindProxy(t, h, el, elector.Timing{TTL: 2 * time.Second})

	// The hand edit: kubectl patch lease ... -p '{"spec":{"preferredHolder":"a"}}'
	edited := editLease(t, leases, el, "the preferredHolder", func(l *coordinationv1.Lease) {
		p := "a"
		l.Spec.PreferredHolder = &p
	})
	if edited.Spec.PreferredHolder == nil {
		t.Skip("this API server drops spec.preferredHolder (CoordinatedLeaderElection off)")
	}
	time.Sleep(time.Second)
	if l, _ := leases.Get(ctx, el, metav1.GetOptions{}); l.Spec.PreferredHolder == nil || holder(l) != "a" {
		t.Fatalf("after the edit: holder %q, preferredHolder %v", holder(l), l.Spec.PreferredHolder)
	}

	g := goElectorVia(t, k, h.Addr(), el, "client-go", 2*time.Second, 1500*time.Millisecond, 50*time.Millisecond)
	time.Sleep(3 * time.Second) // client-go watches a renew
	if s, _ := g.times(); !s.IsZero() {
		t.Fatal("client-go led while a renewed")
	}
	var last time.Time
	electortest.Eventually(t, 10*time.Second, "a renewal sent at .7 s or later", func() bool {
		l, err := leases.Get(ctx, el, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false
		}
		last = l.Spec.RenewTime.Time
		return last.Nanosecond() >= 700e6 && time.Since(last) < 60*time.Millisecond
	})
	pa.Cut()
	t.Logf("a cut off after its renewal sent at %s; its term is valid until %s",
		last.Format("15:04:05.000"), ra.Term.ValidUntil().Format("15:04:05.000"))
	electortest.Eventually(t, 10*time.Second, "client-go leading", func() bool { s, _ := g.times(); return !s.IsZero() })
	started, _ := g.times()
	t.Logf("client-go led %s after a's last renewal was sent", started.Sub(last).Round(time.Millisecond))
	checkNoOverlap(t, "a", ra.Term, "client-go", started)
	pa.Heal()
}
