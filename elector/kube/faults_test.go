package kube_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// loop runs candidates a, b and c of election in a campaign loop.
func loop(t *testing.T, h *harness, election string) *electortest.Terms {
	t.Helper()
	var cands []elector.Elector
	for _, id := range []string{"a", "b", "c"} {
		cands = append(cands, h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
			Election: election, ID: id, Timing: elector.Timing{TTL: 2 * time.Second}}}))
	}
	return electortest.CampaignLoop(t, cands...)
}

// TestStoreFaults: the Lease deleted under its holder, its holder changed
// by hand (as `kubectl edit` would), the API server killed and restarted,
// and its etcd restarted: every term ends before the next begins, and
// tokens only grow (CheckTerms), and a leader holds afterwards (the same
// one, if its renewals resumed within its deadline).
func TestStoreFaults(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	leases := k.Client(t).CoordinationV1().Leases(namespace)
	tests := []struct {
		name  string
		fault func(t *testing.T, election string)
		// lost: the holder's term must end by the fault, with this error.
		lost error
	}{
		{name: "lease deleted", lost: elector.ErrLeadershipLost, fault: deleteLease(leases)},
		{name: "holder changed by hand", lost: elector.ErrLeadershipLost, fault: func(t *testing.T, el string) {
			// As kubectl edit does: read, change, update; a renewal that
			// landed in between makes the update conflict, and it is
			// made again on the Lease as it is now.
			for attempt := 1; ; attempt++ {
				l, err := leases.Get(context.Background(), el, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				who := "intruder"
				l.Spec.HolderIdentity = &who
				_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
				if err == nil {
					return
				}
				if !apierrors.IsConflict(err) || attempt == 10 {
					t.Fatalf("change the holder (attempt %d): %v", attempt, err)
				}
			}
		}},
		{name: "api server killed and restarted", fault: func(t *testing.T, _ string) { k.Kill(t); k.Start(t) }},
		{name: "its etcd restarted", fault: func(t *testing.T, _ string) { k.Etcd().Restart(t) }},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			el := fmt.Sprintf("faults-%d", i)
			terms := loop(t, h, el)
			first := terms.WaitLeading(t, 10*time.Second)
			at := time.Now()
			tc.fault(t, el)
			if tc.lost != nil {
				select {
				case <-first.Term.Done():
				case <-time.After(2 * time.Second):
					t.Fatalf("%s still leads 2 s after the fault", first)
				}
				if err := first.Term.Err(); !errors.Is(err, tc.lost) {
					t.Fatalf("%s ended with %v, want %v", first, err, tc.lost)
				}
				t.Logf("%s's term ended %s after the fault", first.ID, time.Since(at).Round(time.Millisecond))
			}
			// A leader holds afterwards: a term begun since, or one renewed
			// past a whole TTL after the fault's end.
			back := time.Now()
			electortest.Eventually(t, 20*time.Second, "a leader after the fault", func() bool {
				s, ok := terms.Leading()
				return ok && (s.Start.After(at) || s.Term.ValidUntil().After(back.Add(2*time.Second)))
			})
			s, _ := terms.Leading()
			t.Logf("after the fault: %s (began %s after it)", s, s.Start.Sub(at).Round(time.Millisecond))
			spans := terms.Stop(t)
			for _, s := range spans {
				if s.Token != first.Token && s.Token <= first.Token {
					t.Errorf("%s's token is not above the first term's %d", s, first.Token)
				}
			}
		})
	}
}

// TestStaleHandOverMarkIsIgnored: a hand-over mark left on a released
// Lease (a client-go term came between and kept electd's annotations)
// does not hold its ticket's owner back: it takes the free Lease at once.
func TestStaleHandOverMarkIsIgnored(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	const el = "stale-mark"
	leases := k.Client(t).CoordinationV1().Leases(namespace)
	who, secs := "x", int32(2)
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: el},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &who, LeaseDurationSeconds: &secs}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{Election: el, ID: "b", Timing: elector.Timing{TTL: 2 * time.Second}}})
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b in line", func() bool { return h.Queued(t, el) == 2 })
	tickets, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "electd.io/queue=" + el})
	if err != nil || len(tickets.Items) != 1 {
		t.Fatalf("b's ticket: %v, %v", tickets, err)
	}
	l, err := leases.Get(ctx, el, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = nil // released, with b's ticket still marked
	l.Annotations = map[string]string{"electd.io/handover-to": tickets.Items[0].Name}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	rb := electortest.MustLead(t, cb, 5*time.Second, "b")
	t.Logf("b led %s after the release", rb.At.Sub(released).Round(time.Millisecond))
	electortest.Resign(t, rb.Term)
}

// TestHandOverToALeavingFollower: the leader hands the Lease to the first
// in line just as that candidate leaves (a rolling update stops both);
// the next one in line takes it as soon as the named ticket is gone,
// rather than a whole ttl later, and the one that left never leads.
func TestHandOverToALeavingFollower(t *testing.T) {
	k := testenv.StartKube(t)
	h := &harness{k: k}
	ctx := context.Background()
	const el = "leaving-follower"
	timing := elector.Timing{TTL: 5 * time.Second}
	a := candidateAt(t, h, h.Addr(), el, "a", timing)
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	pb := faultproxy.Start(t, h.Addr())
	b := candidateAt(t, h, pb.Addr(), el, "b", timing)
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	cb := electortest.Campaign(bctx, b)
	electortest.Eventually(t, 10*time.Second, "b in line", func() bool { return h.Queued(t, el) == 2 })
	c := candidateAt(t, h, h.Addr(), el, "c", timing)
	cc := electortest.Campaign(ctx, c)
	electortest.Eventually(t, 10*time.Second, "c in line", func() bool { return h.Queued(t, el) == 3 })
	pb.SetDelay(300 * time.Millisecond) // b hears of the hand-over only after it has left
	electortest.Resign(t, ra.Term)
	resigned := time.Now()
	bcancel()
	if r := <-cb; r.Err == nil {
		t.Fatalf("b led (token %d) after its campaign was cancelled", r.Term.Token)
	}
	rc := electortest.MustLead(t, cc, 10*time.Second, "c")
	t.Logf("c led %s after a handed the Lease to b, who left", rc.At.Sub(resigned).Round(time.Millisecond))
	if d := rc.At.Sub(resigned); d > 2*time.Second {
		t.Fatalf("c led %s after the hand-over: it waited for the Lease's duration instead of taking it once b's ticket was gone", d)
	}
	if rc.Term.Token <= ra.Term.Token {
		t.Fatalf("token %d after %d", rc.Term.Token, ra.Term.Token)
	}
	electortest.Resign(t, rc.Term)
}
