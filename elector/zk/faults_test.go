package zk_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// TestZKEnsembleCutOff cuts the leader off the ensemble (a black hole
// between its client and the one member it talks to). Its term must end,
// ValidUntil passed, before the ensemble expires its session (its node's
// deletion, seen by a watcher of its own) and so before the next
// candidate is granted.
func TestZKEnsembleCutOff(t *testing.T) {
	const ttl = 2 * time.Second
	ens := testenv.StartZKEnsemble(t)
	h := &harness{ensemble: ens}
	p := faultproxy.Start(t, ens.Members()[0].Addr())
	ctx := context.Background()
	a := h.New(t, electortest.Candidate{StoreAddr: p.Addr(), Candidate: elector.Candidate{Election: "cut", ID: "a", Timing: elector.Timing{TTL: ttl}}})
	b := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{Election: "cut", ID: "b", Timing: elector.Timing{TTL: ttl}}})
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b queued", func() bool { return h.Queued(t, "cut") == 2 })

	// A watcher of the leader's node, on another member: the instant the
	// ensemble expired a's session is (a little before) its deletion.
	w := client(t, ens.Addrs()[1:])
	names, _, err := w.Children("/electd/elections/cut")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var aNode string
	for _, n := range names {
		if aNode == "" || n[len(n)-10:] < aNode[len(aNode)-10:] {
			aNode = n
		}
	}
	ok, _, watch, err := w.ExistsW("/electd/elections/cut/" + aNode)
	if err != nil || !ok {
		t.Fatalf("watch a's node %s: exists %t, %v", aNode, ok, err)
	}
	deleted := make(chan time.Time, 1)
	go func() {
		if ev := <-watch; ev.Type == gozk.EventNodeDeleted {
			deleted <- time.Now()
		}
		close(deleted)
	}()
	aDone := make(chan time.Time, 1)
	go func() { <-ra.Term.Done(); aDone <- time.Now() }()

	cut := time.Now()
	p.Cut()
	rb := electortest.MustLead(t, cb, 5*ttl, "b")
	var dA, gone time.Time
	select {
	case dA = <-aDone:
	default:
		t.Fatalf("b granted %s after the cut while a's term is open", rb.At.Sub(cut))
	}
	select {
	case gone = <-deleted:
	case <-time.After(5 * time.Second):
		t.Fatal("a's node was not seen deleted")
	}
	vA := ra.Term.ValidUntil()
	ms := func(x time.Time) time.Duration { return x.Sub(cut).Round(time.Millisecond) }
	t.Logf("cut at 0: a Done %s, a ValidUntil %s, a's session expired (node deleted) %s, b granted %s; margin %s; term %s",
		ms(dA), ms(vA), ms(gone), ms(rb.At), gone.Sub(vA).Round(time.Millisecond), ra.Term.Timing())
	if gone.IsZero() || !vA.Before(gone) || !dA.Before(gone) {
		t.Fatalf("a's ValidUntil %s / Done %s not before the expiry of its session %s", ms(vA), ms(dA), ms(gone))
	}
	if !gone.Before(rb.At) && !gone.Equal(rb.At) {
		t.Logf("b's grant %s was seen before the watcher saw the deletion %s (two clients, one event)", ms(rb.At), ms(gone))
	}
	if rb.Term.Token <= ra.Term.Token {
		t.Fatalf("token %d after %d", rb.Term.Token, ra.Term.Token)
	}
	p.Heal()
	electortest.Resign(t, rb.Term)
}

// loop campaigns with three candidates on every member, until the test
// stops it and checks the terms (no overlap, growing tokens).
func loop(t *testing.T, h *harness) *electortest.Terms {
	var cands []elector.Elector
	for _, id := range []string{"a", "b", "c"} {
		cands = append(cands, h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{
			Election: "faults", ID: id, Timing: elector.Timing{TTL: 2 * time.Second}}}))
	}
	terms := electortest.CampaignLoop(t, cands...)
	terms.WaitLeading(t, 20*time.Second)
	return terms
}

// leaderAfter waits until a term holds that started after since, or that
// has held a full TTL since back (it survived the fault). On a timeout it
// shows the election's nodes as the ensemble holds them.
func leaderAfter(t *testing.T, h *harness, terms *electortest.Terms, back time.Time) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if s, ok := terms.Leading(); ok && (s.Start.After(back) || time.Since(back) > 2*time.Second) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader 30s after the fault; terms held %v; the election's nodes: %s", terms.Open(), nodes(t, h, "faults"))
		}
		time.Sleep(10 * time.Millisecond) // polling the terms, not synchronising
	}
}

// nodes describes an election's nodes: name, data and owning session.
func nodes(t *testing.T, h *harness, election string) string {
	c := client(t, h.addrs())
	p := "/electd/elections/" + election
	names, _, err := c.Children(p)
	if err != nil {
		return "(list: " + err.Error() + ")"
	}
	var b strings.Builder
	for _, n := range names {
		d, st, err := c.Get(p + "/" + n)
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", n, err)
			continue
		}
		fmt.Fprintf(&b, "\n  %s: %s (session %#x)", n, d, st.EphemeralOwner)
	}
	return b.String()
}

// TestZKEnsembleMemberKilled kills a follower, then brings it back.
func TestZKEnsembleMemberKilled(t *testing.T) {
	killAndStart(t, "a follower", func(ens *testenv.ZKEnsemble) *testenv.ZK {
		lead := ens.Leader(t)
		for _, m := range ens.Members() {
			if m != lead {
				return m
			}
		}
		t.Fatal("no follower")
		return nil
	})
}

// TestZKEnsembleLeaderKilled kills the ensemble's leader (the others elect
// another), then brings it back.
func TestZKEnsembleLeaderKilled(t *testing.T) {
	killAndStart(t, "the ensemble's leader", func(ens *testenv.ZKEnsemble) *testenv.ZK { return ens.Leader(t) })
}

// killAndStart runs three candidates on an ensemble, kills the member
// pick names, and starts it again: a leader holds after each step, and the
// terms never overlap, with growing tokens.
func killAndStart(t *testing.T, what string, pick func(*testenv.ZKEnsemble) *testenv.ZK) {
	ens := testenv.StartZKEnsemble(t)
	h := &harness{ensemble: ens}
	terms := loop(t, h)
	m := pick(ens)
	m.Kill(t)
	killed := time.Now()
	leaderAfter(t, h, terms, killed)
	t.Logf("a leader %s after %s was killed", time.Since(killed).Round(time.Millisecond), what)
	m.Start(t)
	leaderAfter(t, h, terms, time.Now())
	spans := terms.Stop(t)
	t.Logf("%d terms around the kill of %s, none overlapping, tokens growing", len(spans), what)
}

// TestZKEnsembleRestarted kills every member and starts them again on
// their data: tokens keep growing (the zxid's epoch grows).
func TestZKEnsembleRestarted(t *testing.T) {
	ens := testenv.StartZKEnsemble(t)
	h := &harness{ensemble: ens}
	terms := loop(t, h)
	before, _ := terms.Leading()
	ens.Restart(t)
	back := time.Now()
	leaderAfter(t, h, terms, back)
	after, _ := terms.Leading()
	spans := terms.Stop(t)
	t.Logf("%d terms around the whole ensemble's restart, none overlapping; token %#x before, %#x after", len(spans), before.Token, after.Token)
	if after.Token <= before.Token {
		t.Fatalf("token %#x after the restart, not greater than %#x before", after.Token, before.Token)
	}
	// A candidate that queues after the restart leads in the new epoch.
	d := h.New(t, electortest.Candidate{StoreAddr: h.Addr(), Candidate: elector.Candidate{Election: "faults", ID: "d", Timing: elector.Timing{TTL: 2 * time.Second}}})
	rd := electortest.MustLead(t, electortest.Campaign(context.Background(), d), 10*time.Second, "d")
	t.Logf("a candidate queued after the restart leads with %#x", rd.Term.Token)
	if rd.Term.Token>>32 <= before.Token>>32 {
		t.Fatalf("token %#x after the restart is not of a later epoch than %#x", rd.Term.Token, before.Token)
	}
	electortest.Resign(t, rd.Term)
}
