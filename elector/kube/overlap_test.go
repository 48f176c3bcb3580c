package kube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// These tests look for two valid terms at once: a candidate granted the
// Lease while another's term has not ended and its ValidUntil is still
// ahead. Where the leader could notice the takeover through its watch
// within milliseconds, its link is cut first (a partition: the case its
// deadline exists for), so that the overlap is the whole promise it broke.

// candidateAt is a candidate of election dialing addr (the API server or a
// fault proxy in front of it).
func candidateAt(t *testing.T, h *harness, addr, election, id string, timing elector.Timing) elector.Locker {
	t.Helper()
	return h.New(t, electortest.Candidate{StoreAddr: addr, Candidate: elector.Candidate{Election: election, ID: id, Timing: timing}})
}

// leaderBehindProxy makes a lead election, dialing the API server through
// a fault proxy of its own, with timing.
func leaderBehindProxy(t *testing.T, h *harness, election string, timing elector.Timing) (*faultproxy.Proxy, electortest.Result) {
	t.Helper()
	pa := faultproxy.Start(t, h.Addr())
	a := candidateAt(t, h, pa.Addr(), election, "a", timing)
	return pa, electortest.MustLead(t, electortest.Campaign(context.Background(), a), 10*time.Second, "a")
}

// deleteLease is the fault of a Lease deleted by hand (kubectl delete
// lease) in the election a test names.
func deleteLease(leases coordv1.LeaseInterface) func(t *testing.T, election string) {
	return func(t *testing.T, el string) {
		if err := leases.Delete(context.Background(), el, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete the Lease: %v", err)
		}
	}
}

// tickets lists the election's tickets by holder.
func tickets(t *testing.T, k *testenv.Kube, election string) map[string]bool {
	t.Helper()
	list, err := k.Client(t).CoordinationV1().Leases(namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "electd.io/queue=" + election})
	if err != nil {
		t.Fatalf("list tickets: %v", err)
	}
	ids := map[string]bool{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil {
			ids[*l.Spec.HolderIdentity] = true
		}
	}
	return ids
}

// editLease is a hand edit of the Lease name (kubectl edit): read, change
// by edit, write; tried again while a renewal of its holder's comes
// between (a conflict), for 5s at most; what names the edit.
func editLease(t *testing.T, leases coordv1.LeaseInterface, name, what string, edit func(l *coordinationv1.Lease)) *coordinationv1.Lease {
	t.Helper()
	var edited *coordinationv1.Lease
	electortest.Eventually(t, 5*time.Second, "the edit of "+what, func() bool {
		l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		edit(l)
		edited, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			t.Fatalf("edit %s: %v", what, err)
		}
		return err == nil
	})
	return edited
}

// checkNoOverlap fails t if prev's term was still valid, with its
// ValidUntil ahead, when next's campaign returned at nextAt; it then waits
// for prev's term to end and reports how long the two terms overlapped.
func checkNoOverlap(t *testing.T, prevID string, prev *elector.Term, nextID string, nextAt time.Time) {
	t.Helper()
	promised := prev.ValidUntil()
	if prev.Err() != nil || !promised.After(nextAt) {
		t.Logf("%s's term had ended (%v, valid until %s) when %s led at %s", prevID, prev.Err(),
			promised.Format(time.StampMilli), nextID, nextAt.Format(time.StampMilli))
		return
	}
	select {
	case <-prev.Done():
	case <-time.After(time.Until(promised) + 5*time.Second):
	}
	end := prev.ValidUntil()
	t.Errorf("two valid terms at once: %s was granted a term at %s while %s's term was valid until %s "+
		"(promised overlap %s); %s's term ended at %s (%v): actual overlap %s",
		nextID, nextAt.Format(time.StampMilli), prevID, promised.Format(time.StampMilli),
		promised.Sub(nextAt).Round(time.Millisecond), prevID, end.Format(time.StampMilli), prev.Err(),
		end.Sub(nextAt).Round(time.Millisecond))
}

// TestHandOverClaimLeaseDurationIsClaimersTTL: a term claimed after a
// hand-over must write its own duration into the Lease. The resigning
// holder (ttl 1 s) writes the hand-over with its leaseDurationSeconds, the
// heir (ttl 10 s) claims and renews it without changing the duration, and
// counts its deadline from its own ttl: the next waiter times the Lease
// for 1 s and takes it while the heir's term runs for 9 s more.
// (elector.Candidate asks every candidate to use the same TTL; a rolling
// change of --ttl does not, for a while, and this backend otherwise honours
// whatever duration the holder wrote: take writes its own.)
func TestHandOverClaimLeaseDurationIsClaimersTTL(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	el := "overlap-handover-ttl"
	a := candidateAt(t, h, h.Addr(), el, "a", elector.Timing{TTL: time.Second})
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	pb := faultproxy.Start(t, h.Addr())
	b := candidateAt(t, h, pb.Addr(), el, "b", elector.Timing{TTL: 10 * time.Second})
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b's ticket", func() bool { return tickets(t, k, el)["b"] })
	c := candidateAt(t, h, h.Addr(), el, "c", elector.Timing{TTL: time.Second})
	cc := electortest.Campaign(ctx, c)
	electortest.Eventually(t, 10*time.Second, "c's ticket behind b's", func() bool { return tickets(t, k, el)["c"] })
	time.Sleep(200 * time.Millisecond) // a's view shows both tickets

	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, 10*time.Second, "b")
	l, err := k.Client(t).CoordinationV1().Leases(namespace).Get(ctx, el, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("b claimed the hand-over: leaseDurationSeconds %d, b's term valid until %s (%s after it led)",
		*l.Spec.LeaseDurationSeconds, rb.Term.ValidUntil().Format(time.StampMilli), rb.Term.ValidUntil().Sub(rb.At).Round(time.Millisecond))
	// b leaves the line once it leads; then it is cut off.
	electortest.Eventually(t, 5*time.Second, "b's ticket gone", func() bool { return !tickets(t, k, el)["b"] })
	pb.Cut()
	rc := electortest.MustLead(t, cc, 15*time.Second, "c")
	checkNoOverlap(t, "b", rb.Term, "c", rc.At)
	pb.Heal()
}

// TestRenewalRestoresLeaseDuration: a leader whose Lease someone edited
// (kubectl edit: leaseDurationSeconds 10 -> 1) renews the edited object on
// the next conflict, so its own renewals write a duration of 1 s while it
// counts its deadline from its ttl of 10 s. A waiter times the leader's
// own renewal for 1 s and takes the Lease 9 s before the leader's deadline.
func TestRenewalRestoresLeaseDuration(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	el := "overlap-edited-duration"
	leases := k.Client(t).CoordinationV1().Leases(namespace)
	// A short renewal interval: a renews on top of the edit before b's
	// 1 s runs out.
	pa, ra := leaderBehindProxy(t, h, el, elector.Timing{TTL: 10 * time.Second, RenewInterval: 300 * time.Millisecond})
	b := candidateAt(t, h, h.Addr(), el, "b", elector.Timing{TTL: 10 * time.Second})
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b's ticket", func() bool { return tickets(t, k, el)["b"] })

	edited := editLease(t, leases, el, "the duration", func(l *coordinationv1.Lease) {
		one := int32(1)
		l.Spec.LeaseDurationSeconds = &one
	})
	// a renews on top of the edit (its own write, after which its deadline
	// is ~10 s away) and keeps the edited duration.
	electortest.Eventually(t, 5*time.Second, "a renewing the edited Lease", func() bool {
		cur, err := leases.Get(ctx, el, metav1.GetOptions{})
		return err == nil && cur.ResourceVersion != edited.ResourceVersion && cur.Spec.RenewTime.After(edited.Spec.RenewTime.Time)
	})
	cur, _ := leases.Get(ctx, el, metav1.GetOptions{})
	t.Logf("a's renewal after the edit wrote leaseDurationSeconds %d; a's term valid until %s",
		*cur.Spec.LeaseDurationSeconds, ra.Term.ValidUntil().Format(time.StampMilli))
	notLedYet(t, cb, "b", "a", ra.Term)
	pa.Cut()
	rb := electortest.MustLead(t, cb, 15*time.Second, "b")
	checkNoOverlap(t, "a", ra.Term, "b", rb.At)
	pa.Heal()
}

// notLedYet fails t if the campaign of who on ch has returned while
// leaderID still renews its term.
func notLedYet(t *testing.T, ch <-chan electortest.Result, who, leaderID string, leader *elector.Term) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s led at %s while %s renewed (%s: %v, valid until %s)", who, r.At.Format(time.StampMilli), leaderID,
			leaderID, leader.Err(), leader.ValidUntil().Format(time.StampMilli))
	default:
	}
}

// TestTakeAfterExternalReleaseWaitsOutHolder: the Lease deleted, or its
// holder cleared, by someone else (kubectl delete lease, kubectl edit)
// while the leader is cut off from the API server. The leader cannot see
// it and holds its term to its deadline; a waiter must not take the Lease
// before that deadline. Today a waiter takes a Lease that is gone, or
// names no holder, at once.
func TestTakeAfterExternalReleaseWaitsOutHolder(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	leases := k.Client(t).CoordinationV1().Leases(namespace)
	tests := []struct {
		name  string
		fault func(t *testing.T, election string)
	}{
		{name: "lease deleted", fault: deleteLease(leases)},
		{name: "holder cleared by hand", fault: func(t *testing.T, el string) {
			l, err := leases.Get(context.Background(), el, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			l.Spec.HolderIdentity = nil
			if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("clear the holder: %v", err)
			}
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			el := []string{"overlap-deleted", "overlap-cleared"}[i]
			pa, ra := leaderBehindProxy(t, h, el, elector.Timing{TTL: 10 * time.Second})
			b := candidateAt(t, h, h.Addr(), el, "b", elector.Timing{TTL: 10 * time.Second})
			cb := electortest.Campaign(ctx, b)
			electortest.Eventually(t, 10*time.Second, "b's ticket", func() bool { return tickets(t, k, el)["b"] })
			pa.Cut()
			tc.fault(t, el)
			rb := electortest.MustLead(t, cb, 15*time.Second, "b")
			checkNoOverlap(t, "a", ra.Term, "b", rb.At)
			pa.Heal()
		})
	}
}

// hookLeases calls before ahead of every Update; the function it returns
// gets the Update's error.
type hookLeases struct {
	coordv1.LeasesGetter
	before func(*coordinationv1.Lease) func(error)
}

func (h hookLeases) Leases(ns string) coordv1.LeaseInterface {
	return hookLease{LeaseInterface: h.LeasesGetter.Leases(ns), before: h.before}
}

type hookLease struct {
	coordv1.LeaseInterface
	before func(*coordinationv1.Lease) func(error)
}

func (h hookLease) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	after := h.before(l)
	got, err := h.LeaseInterface.Update(ctx, l, opts)
	after(err)
	return got, err
}

// TestClientGoWaitsOutPartitionedElectdLeader: a client-go elector
// (lease duration 2 s, the same ttl) beside an electd leader (--ttl 2s,
// renewals every 400 ms) must not take the Lease before the leader's
// deadline when the leader is cut off. client-go times a holder from the
// last change of its LeaderElectionRecord, whose renewTime has whole
// seconds (metav1.Time, RFC 3339): electd's second and third renewals
// inside one wall-clock second do not change it, so client-go's clock runs
// from the first renewal of that second while the leader's deadline runs
// from its last. The leader is cut off just after a renewal sent late in
// its second (at .6 s or later, so at least one renewal of that second
// came before it).
func TestClientGoWaitsOutPartitionedElectdLeader(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	el := "overlap-client-go"
	timing := elector.Timing{TTL: 2 * time.Second}
	pa, ra := leaderBehindProxy(t, h, el, timing)

	var (
		mu       sync.Mutex
		grantAt  time.Time
		grantedC = make(chan struct{})
	)
	// hook records when client-go's takeover returned.
	hook := func(l *coordinationv1.Lease) func(error) {
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "client-go" {
			return func(error) {}
		}
		return func(err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil && grantAt.IsZero() {
				grantAt = time.Now()
				close(grantedC)
			}
		}
	}
	cs := k.Client(t)
	goe := runGoOn(t, hookLeases{LeasesGetter: cs.CoordinationV1(), before: hook}, el, "client-go", 2*time.Second, 1500*time.Millisecond, 100*time.Millisecond, false)
	defer goe.stop()

	time.Sleep(3 * time.Second) // client-go watches electd renew
	select {
	case <-grantedC:
		t.Fatal("client-go took the Lease while electd renewed it")
	default:
	}
	// Cut a off just after a renewal sent late in its wall-clock second:
	// one that client-go cannot tell from the second's first.
	var last time.Time
	electortest.Eventually(t, 10*time.Second, "a renewal sent at .6 s or later", func() bool {
		l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, el, metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false
		}
		last = l.Spec.RenewTime.Time // the send time of a's last renewal
		return last.Nanosecond() >= 600e6 && time.Since(last) < 100*time.Millisecond
	})
	pa.Cut()
	t.Logf("a cut off after its renewal sent at %s; its term is valid until %s",
		last.Format("15:04:05.000"), ra.Term.ValidUntil().Format("15:04:05.000"))
	select {
	case <-grantedC:
	case <-time.After(time.Until(ra.Term.ValidUntil()) + 3*time.Second):
		t.Fatal("client-go did not take the Lease after a's deadline")
	}
	mu.Lock()
	g := grantAt
	mu.Unlock()
	t.Logf("client-go took the Lease %s after a's last renewal was sent", g.Sub(last).Round(time.Millisecond))
	checkNoOverlap(t, "a", ra.Term, "client-go", g)
	pa.Heal()
}
