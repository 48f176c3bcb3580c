package zk_test

// Adversarial tests of a proof's write (term.go, stamp: setData of
// [chroot]/electd/renewals/NAME after the Sync's answer) and of the fast
// term start (lead on the evidence of a waiter's warm read, campaign.go
// warmEvery): the renewals node refused or deleted by an operator, a
// successor whose connection changed between its warm read and its term's
// write, and two warm waiters of a semaphore churning. Each asserts the
// promise exactly: no two valid terms at once (a term's ValidUntil and Done
// before the next grant), tokens that only grow, evidence that never
// crosses a reconnection.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/zk"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// stampTiming is the timing of these tests: a 2s session (the test
// server's tick is small enough for it to be granted as asked).
var stampTiming = elector.Timing{TTL: 2 * time.Second}

// renewalsPath is the election's renewals node (no chroot).
func renewalsPath(election string) string { return "/electd/renewals/" + election }

// TestTermStampRefusedMidTerm: an operator makes the renewals node
// read-only while a leads and b waits (warm). Every renewal of a fails on
// its write (NoAuth after the session check): a's ValidUntil must not move
// past the evidence of a renewal sent before the change, its term must end
// at that deadline (not linger), and b, woken by a's node's deletion,
// writes Since into its node but must not be granted while its stamp is
// refused. Once the ACL is back, b (again) leads with a greater token.
func TestTermStampRefusedMidTerm(t *testing.T) {
	srv := testenv.StartZK(t)
	h := &harness{single: srv}
	const election = "stamp-refused"
	url := "zk://" + srv.Addr()
	a := electortest.DialURL(t, zk.Backend, url, elector.Candidate{Election: election, ID: "a", Timing: stampTiming})
	b := electortest.DialURL(t, zk.Backend, url, elector.Candidate{Election: election, ID: "b", Timing: stampTiming})
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 5*time.Second, "b queued", func() bool { return h.Queued(t, election) == 2 })
	electortest.StillWaiting(t, cb, "b")

	op := client(t, h.addrs())
	held := sample(ra.Term, 5*time.Millisecond)
	window := ra.Term.Timing().Window()
	cut := time.Now()
	if _, err := op.SetACL(renewalsPath(election), gozk.WorldACL(gozk.PermRead|gozk.PermAdmin), -1); err != nil {
		t.Fatalf("make the renewals node read-only: %v", err)
	}
	ms := relTo(cut)

	var dA time.Time
	select {
	case dA = <-held.ended:
	case <-time.After(window + 2*time.Second):
		t.Fatalf("HOLE: a's term still open %s after its renewals' writes were refused (ValidUntil %s)",
			window+2*time.Second, ms(ra.Term.ValidUntil()))
	}
	vA := held.maxValid()
	t.Logf("refused at 0: a's ValidUntil %s, Done %s (%v); window %s", ms(vA), ms(dA), ra.Term.Err(), window)
	if vA.After(cut.Add(window)) {
		t.Errorf("HOLE: a's ValidUntil %s moved past the refusal's window %s: a renewal counted without its write", ms(vA), ms(cut.Add(window)))
	}
	if dA.Sub(vA) > 100*time.Millisecond {
		t.Errorf("a's term lingered: Done %s, %s after its ValidUntil %s", ms(dA), dA.Sub(vA), ms(vA))
	}

	// b is woken by the deletion of a's node; its stamp is refused.
	var again <-chan electortest.Result
	select {
	case rb := <-cb:
		if rb.Err == nil {
			t.Fatalf("HOLE: b granted at %s while its stamp is refused (a's ValidUntil %s)", ms(rb.At), ms(vA))
		}
		t.Logf("b's campaign failed at %s: %v", ms(rb.At), rb.Err)
		// b's node, its Since written, must not stay in line as if it held.
		electortest.Eventually(t, 5*time.Second, "b's node gone", func() bool { return h.Queued(t, election) == 0 })
	case <-time.After(2 * window):
		t.Logf("b still campaigning %s after a's term ended", 2*window)
		again = cb
	}
	if _, err := op.SetACL(renewalsPath(election), gozk.WorldACL(gozk.PermAll), -1); err != nil {
		t.Fatalf("restore the renewals node's ACL: %v", err)
	}
	if again == nil {
		again = electortest.Campaign(ctx, b)
	}
	rb := electortest.MustLead(t, again, 10*time.Second, "b")
	if rb.At.Before(vA) || rb.At.Before(dA) {
		t.Errorf("HOLE: b granted at %s, a valid until %s, Done %s", ms(rb.At), ms(vA), ms(dA))
	}
	if rb.Term.Token <= ra.Term.Token {
		t.Errorf("HOLE: token %#x after %#x", rb.Term.Token, ra.Term.Token)
	}
	electortest.Resign(t, rb.Term)
}

// TestTermStampDeletedWhileWarm: an operator deletes the renewals node and
// its parent while b waits warm (b's elector created them when it joined,
// and does not again). a resigns: b's term starts on its warm read, and
// its stamp must create the node and its parent again (spending the first
// window: lead checks the room again after it). b's grant must follow a's
// end with a greater token, and b's renewals must go on.
func TestTermStampDeletedWhileWarm(t *testing.T) {
	srv := testenv.StartZK(t)
	h := &harness{single: srv}
	const election = "stamp-deleted"
	url := "zk://" + srv.Addr()
	a := electortest.DialURL(t, zk.Backend, url, elector.Candidate{Election: election, ID: "a", Timing: stampTiming})
	b := electortest.DialURL(t, zk.Backend, url, elector.Candidate{Election: election, ID: "b", Timing: stampTiming})
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 5*time.Second, "b queued", func() bool { return h.Queued(t, election) == 2 })
	// b's warm reads go every (RenewInterval − lag)/2: let one or two pass.
	time.Sleep(ra.Term.Timing().RenewInterval)
	electortest.StillWaiting(t, cb, "b")

	op := client(t, h.addrs())
	for _, p := range []string{renewalsPath(election), "/electd/renewals"} {
		if err := op.Delete(p, -1); err != nil {
			t.Fatalf("delete %s: %v", p, err)
		}
	}
	resigned := time.Now()
	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, 10*time.Second, "b")
	first := rb.Term.ValidUntil()
	t.Logf("a resigned at 0; b granted %s, b's first ValidUntil %s (evidence %s)", rb.At.Sub(resigned),
		first.Sub(resigned), first.Add(-rb.Term.Timing().Window()).Sub(resigned))
	if rb.Term.Token <= ra.Term.Token {
		t.Errorf("HOLE: token %#x after %#x", rb.Term.Token, ra.Term.Token)
	}
	if ok, _, err := op.Exists(renewalsPath(election)); err != nil || !ok {
		t.Errorf("renewals node after b's start: exists %v, err %v", ok, err)
	}
	held := sample(rb.Term, 5*time.Millisecond)
	select {
	case <-held.changed:
	case <-time.After(2 * rb.Term.Timing().RenewInterval):
		t.Errorf("b's ValidUntil did not move within two renewal intervals (Err %v)", rb.Term.Err())
	}
	electortest.Resign(t, rb.Term)
}

// TestTermStampReconnectBeforeWrite: b waits warm through a fault proxy,
// which resets b's connection just before a resigns. b's client dials
// again (a new link): its term's start must not count from a warm read of
// the old connection (its relay is not ordered before a write on the new
// one): b's first evidence (ValidUntil − window) must be no earlier than
// the reset.
func TestTermStampReconnectBeforeWrite(t *testing.T) {
	srv := testenv.StartZK(t)
	h := &harness{single: srv}
	const election = "stamp-reconnect"
	p := faultproxy.Start(t, srv.Addr())
	a := electortest.DialURL(t, zk.Backend, "zk://"+srv.Addr(), elector.Candidate{Election: election, ID: "a", Timing: stampTiming})
	b := electortest.DialURL(t, zk.Backend, "zk://"+p.Addr(), elector.Candidate{Election: election, ID: "b", Timing: stampTiming})
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 5*time.Second, "b queued", func() bool { return h.Queued(t, election) == 2 })
	// b's warm reads go every (RenewInterval − lag)/2: let one or two pass.
	time.Sleep(ra.Term.Timing().RenewInterval)
	electortest.StillWaiting(t, cb, "b")

	reset := time.Now()
	p.Reset()
	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, 10*time.Second, "b")
	ev := rb.Term.ValidUntil().Add(-rb.Term.Timing().Window())
	t.Logf("reset at 0; b granted %s, b's first evidence sent %s", rb.At.Sub(reset), ev.Sub(reset))
	if ev.Before(reset) {
		t.Errorf("HOLE: b's first deadline counts from a request sent %s before its connection was reset", reset.Sub(ev))
	}
	if rb.Term.Token <= ra.Term.Token {
		t.Errorf("HOLE: token %#x after %#x", rb.Term.Token, ra.Term.Token)
	}
	electortest.Resign(t, rb.Term)
}

// stampHold is one term of the churn: its grant, its token, and the end of
// what it claimed (the earlier of its greatest ValidUntil and the moment
// before its Resign was called).
type stampHold struct {
	who   string
	at    time.Time
	token uint64
	held  *sampled
	end   time.Time
}

// TestTermStampSlotsChurn: a semaphore of 2 slots on a three-member
// ensemble, four candidates on different members, so that two waiters
// are warm at once (each of the first Slots waiters reads its node while
// it waits). The holders resign in turn, oldest first, and campaign
// again; every grant must find at most one other term still valid, and
// every token must exceed every earlier one.
func TestTermStampSlotsChurn(t *testing.T) {
	ens := testenv.StartZKEnsemble(t)
	const election = "stamp-churn"
	const n, rounds = 4, 12
	ctx := context.Background()
	type cand struct {
		id string
		e  elector.Locker
		ch <-chan electortest.Result
	}
	cands := make([]*cand, n)
	for i := range cands {
		id := fmt.Sprintf("c%d", i)
		addr := ens.Members()[i%len(ens.Members())].Addr()
		e := electortest.DialURL(t, zk.Backend, "zk://"+addr, elector.Candidate{Election: election, ID: id, Timing: stampTiming, Slots: 2})
		cands[i] = &cand{id: id, e: e, ch: electortest.Campaign(ctx, e)}
		// Queue in order, so that the first two hold and the next two wait warm.
		h := &harness{ensemble: ens}
		electortest.Eventually(t, 10*time.Second, id+" queued", func() bool { return h.Queued(t, election) == i+1 })
	}
	var holds []*stampHold
	var maxToken uint64
	grant := func(c *cand, r electortest.Result) {
		if r.Err != nil {
			t.Fatalf("%s: campaign: %v", c.id, r.Err)
		}
		// Terms still claimed at r.At besides this one: at most one.
		var open []string
		for _, o := range holds {
			end := o.end
			if end.IsZero() {
				end = o.held.maxValid()
			}
			if end.After(r.At) {
				open = append(open, fmt.Sprintf("%s until %s", o.who, end.Format("15:04:05.000")))
			}
		}
		if len(open) >= 2 {
			t.Errorf("HOLE: %s granted at %s while 2 slots' terms are valid: %v", c.id, r.At.Format("15:04:05.000"), open)
		}
		if r.Term.Token <= maxToken {
			t.Errorf("HOLE: %s's token %#x after %#x", c.id, r.Term.Token, maxToken)
		}
		maxToken = max(maxToken, r.Term.Token)
		holds = append(holds, &stampHold{who: c.id, at: r.At, token: r.Term.Token, held: sample(r.Term, 5*time.Millisecond)})
	}
	terms := map[*stampHold]*elector.Term{}
	await := func(within time.Duration) *stampHold {
		deadline := time.After(within)
		for {
			for _, c := range cands {
				select {
				case r := <-c.ch:
					c.ch = nil
					grant(c, r)
					hl := holds[len(holds)-1]
					terms[hl] = r.Term
					return hl
				default:
				}
			}
			select {
			case <-deadline:
				t.Fatalf("no grant within %s", within)
			case <-time.After(2 * time.Millisecond): // polling the campaigns' channels
			}
		}
	}
	live := []*stampHold{await(10 * time.Second), await(10 * time.Second)}
	var handovers []time.Duration
	for range rounds {
		old := live[0]
		live = live[1:]
		old.end = time.Now()
		if v := old.held.maxValid(); v.Before(old.end) {
			old.end = v
		}
		resigned := time.Now()
		term := terms[old]
		if err := term.Resign(ctx); err != nil {
			t.Fatalf("%s: resign: %v", old.who, err)
		}
		if !errors.Is(term.Err(), elector.ErrResigned) {
			t.Errorf("%s: after resign, Err %v", old.who, term.Err())
		}
		for _, c := range cands {
			if c.id == old.who {
				c.ch = electortest.Campaign(ctx, c.e)
			}
		}
		next := await(10 * time.Second)
		handovers = append(handovers, next.at.Sub(resigned))
		live = append(live, next)
	}
	t.Logf("handovers (resign → next grant): %v", handovers)
	for _, hl := range live {
		if err := terms[hl].Resign(ctx); err != nil {
			t.Errorf("%s: resign: %v", hl.who, err)
		}
	}
}

// TestTermStampWarmOnCutFollowerBrief: the successor b waits warm
// connected only to follower F; a leads on G, c queues behind b on the
// ensemble's leader. F is cut off from its peers for 600ms (less than
// syncLimit·tickTime: F stays a follower, and TCP delivers what was held,
// in order) while a resigns: b's warm reads in the cut are answered by F,
// whose touches cannot reach the leader until the cut ends, and b cannot
// hear of a's node's deletion before then either. No two terms of a, b and
// c may overlap, and tokens must grow in grant order.
func TestTermStampWarmOnCutFollowerBrief(t *testing.T) {
	warmOnCutFollower(t, 600*time.Millisecond, false)
}

// TestTermStampWarmOnCutFollowerThenSilent is the brief cut, but b,
// once granted, is cut off (its link to F held, through a fault proxy)
// instead of resigning: b's term, often started on a warm read that F
// answered in the cut, ends at its first deadline, and c is granted when
// the ensemble's leader expires b's session, counted from the last touch
// of b it applied. Were F's relay of that read lost, the leader would
// expire b's session a session timeout after F's last relay before the
// cut, before b's ValidUntil.
func TestTermStampWarmOnCutFollowerThenSilent(t *testing.T) {
	warmOnCutFollower(t, 600*time.Millisecond, true)
}

// TestTermStampWarmOnCutFollowerLong is the same with a cut of 1.6s: F
// gives up on its leader after 1s and drops b's connection; b's session
// (2s) may outlive the cut, and b then leads on a new connection (its warm
// reads on F must not vouch for it), or expires, and c leads.
func TestTermStampWarmOnCutFollowerLong(t *testing.T) {
	warmOnCutFollower(t, 1600*time.Millisecond, false)
}

// warmOnCutFollower: see TestTermStampWarmOnCutFollowerBrief; with
// silence, b reaches F through a fault proxy that is cut when b is
// granted, and b does not resign.
func warmOnCutFollower(t *testing.T, cut time.Duration, silence bool) {
	members := testenvEnsemble(t)
	lead, f, g := roles(t, members)
	const election = "stamp-cut"
	ctx := context.Background()
	dial := func(id string, m zkMember) elector.Locker {
		return electortest.DialURL(t, zk.Backend, "zk://"+m.Addr(), elector.Candidate{Election: election, ID: id, Timing: stampTiming})
	}
	a, c := dial("a", g), dial("c", lead)
	pb := faultproxy.Start(t, f.Addr())
	b := electortest.DialURL(t, zk.Backend, "zk://"+pb.Addr(), elector.Candidate{Election: election, ID: "b", Timing: stampTiming})
	w := client(t, []string{lead.Addr()})
	queued := func(n int) func() bool {
		return func() bool {
			names, _, err := w.Children("/electd/elections/" + election)
			return err == nil && len(names) == n
		}
	}
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 30*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b queued", queued(2))
	cc := electortest.Campaign(ctx, c)
	electortest.Eventually(t, 10*time.Second, "c queued", queued(3))
	// b's warm reads go every (RenewInterval − lag)/2: let one or two pass.
	time.Sleep(ra.Term.Timing().RenewInterval)
	electortest.StillWaiting(t, cb, "b")
	electortest.StillWaiting(t, cc, "c")

	type hold struct {
		who  string
		r    electortest.Result
		held *sampled
		end  time.Time // a's resignation (called), else zero: the sampled ValidUntil
	}
	heldA := sample(ra.Term, 2*time.Millisecond)
	heal := isolateFollower(t, f, []zkMember{lead, g})
	start := time.Now()
	ms := relTo(start)
	// A few of b's warm reads answered by F in the cut, then a resigns.
	time.Sleep(300 * time.Millisecond)
	resigned := time.Now()
	electortest.Resign(t, ra.Term)
	healTimer := time.NewTimer(cut - time.Since(start))
	var healed time.Time
	holds := []hold{{who: "a", r: ra, held: heldA, end: resigned}}
	pending := map[string]<-chan electortest.Result{"b": cb, "c": cc}
	for len(pending) > 0 {
		var r electortest.Result
		var who string
		select {
		case <-healTimer.C:
			heal()
			healed = time.Now()
			t.Logf("F healed at %s", ms(healed))
			continue
		case r = <-pending["b"]:
			who = "b"
		case r = <-pending["c"]:
			who = "c"
		case <-time.After(30 * time.Second):
			t.Fatalf("no grant within 30s (pending %d)", len(pending))
		}
		delete(pending, who)
		if r.Err != nil {
			t.Logf("%s's campaign failed at %s: %v; again", who, ms(r.At), r.Err)
			pending[who] = electortest.Campaign(ctx, map[string]elector.Locker{"b": b, "c": c}[who])
			continue
		}
		ev := r.Term.ValidUntil().Add(-r.Term.Timing().Window())
		t.Logf("%s granted at %s (token %#x), first evidence sent %s", who, ms(r.At), r.Term.Token, ms(ev))
		for _, o := range holds {
			end := o.end
			if end.IsZero() || o.held.maxValid().Before(end) {
				end = o.held.maxValid()
			}
			select {
			case <-o.r.Term.Done():
			case <-time.After(100 * time.Millisecond):
				t.Errorf("HOLE: %s granted at %s while %s's term is still open (ValidUntil %s)", who, ms(r.At), o.who, ms(o.held.maxValid()))
			}
			if end.After(r.At) {
				t.Errorf("HOLE: %s granted at %s while %s's term was valid until %s: overlap %s", who, ms(r.At), o.who, ms(end), end.Sub(r.At).Round(time.Millisecond))
			}
			if r.Term.Token <= o.r.Term.Token {
				t.Errorf("HOLE: %s's token %#x after %s's %#x", who, r.Term.Token, o.who, o.r.Term.Token)
			}
		}
		if !healed.IsZero() && ev.Before(healed) {
			t.Logf("%s's term counts from a request F answered in the cut (%s before the heal)", who, healed.Sub(ev).Round(time.Millisecond))
		}
		hl := hold{who: who, r: r, held: sample(r.Term, 2*time.Millisecond)}
		if silence && who == "b" {
			// b goes silent: its term ends at its deadline, its session
			// when the ensemble's leader expires it.
			pb.Cut()
			t.Logf("b cut off at %s, ValidUntil %s", ms(time.Now()), ms(r.Term.ValidUntil()))
			holds = append(holds, hl)
			continue
		}
		// The next one waits for this one: resign it (its end, called).
		hl.end = time.Now()
		if err := r.Term.Resign(ctx); err != nil {
			t.Logf("%s: resign: %v", who, err)
		}
		holds = append(holds, hl)
	}
	healTimer.Stop()
	heal()
}

// TestTermStampLeaderKilled: the ensemble's leader is killed (SIGKILL)
// three times, at varying phases of a's renewals (a leader change may fall
// between a proof's Sync and its write), and started again, while a leads
// on one member and b waits warm on another. Every term that ends is
// campaigned for again. Each grant must find every earlier term ended and
// its ValidUntil passed, with a greater token.
func TestTermStampLeaderKilled(t *testing.T) {
	ens := testenv.StartZKEnsemble(t)
	var members []zkMember
	for _, m := range ens.Members() {
		members = append(members, m)
	}
	lead, f, g := roles(t, members)
	const election = "stamp-killed"
	// a on one follower, b on the other: the kills take the leader, which
	// moves, so a or b may lose its only member in a later round.
	ctx := context.Background()
	els := map[string]elector.Locker{}
	for id, m := range map[string]zkMember{"a": f, "b": g} {
		els[id] = electortest.DialURL(t, zk.Backend, "zk://"+m.Addr(), elector.Candidate{Election: election, ID: id, Timing: stampTiming})
	}
	start := time.Now()
	ms := relTo(start)
	type hold struct {
		who  string
		r    electortest.Result
		held *sampled
	}
	var holds []hold
	pending := map[string]<-chan electortest.Result{"a": electortest.Campaign(ctx, els["a"])}
	check := func(who string, r electortest.Result) {
		if r.Err != nil {
			t.Logf("%s's campaign failed at %s: %v; again", who, ms(r.At), r.Err)
			pending[who] = electortest.Campaign(ctx, els[who])
			return
		}
		t.Logf("%s granted at %s (token %#x), first evidence sent %s", who, ms(r.At), r.Term.Token,
			ms(r.Term.ValidUntil().Add(-r.Term.Timing().Window())))
		for _, o := range holds {
			select {
			case <-o.r.Term.Done():
			case <-time.After(100 * time.Millisecond):
				t.Errorf("HOLE: %s granted at %s while %s's term is still open (ValidUntil %s)", who, ms(r.At), o.who, ms(o.r.Term.ValidUntil()))
			}
			if v := o.held.maxValid(); v.After(r.At) {
				t.Errorf("HOLE: %s granted at %s while %s's term was valid until %s: overlap %s", who, ms(r.At), o.who, ms(v), v.Sub(r.At).Round(time.Millisecond))
			}
			if r.Term.Token <= o.r.Term.Token {
				t.Errorf("HOLE: %s's token %#x after %s's %#x", who, r.Term.Token, o.who, o.r.Term.Token)
			}
		}
		hl := hold{who: who, r: r, held: sample(r.Term, 2*time.Millisecond)}
		holds = append(holds, hl)
	}
	// drain takes the grants that have come, and campaigns again for the
	// terms that ended.
	drain := func() {
		for who, ch := range pending {
			select {
			case r := <-ch:
				delete(pending, who)
				check(who, r)
			default:
			}
		}
		for _, id := range []string{"a", "b"} {
			if _, ok := pending[id]; ok {
				continue
			}
			last := -1
			for i, hl := range holds {
				if hl.who == id {
					last = i
				}
			}
			if last < 0 || holds[last].r.Term.Err() != nil {
				pending[id] = electortest.Campaign(ctx, els[id])
			}
		}
	}
	electortest.Eventually(t, 30*time.Second, "a or b leads", func() bool { drain(); return len(holds) > 0 })
	electortest.Eventually(t, 10*time.Second, "b queued", func() bool {
		drain()
		return (&harness{ensemble: ens}).Queued(t, election) == 2
	})
	tm := holds[0].r.Term.Timing()
	for round := range 3 {
		// A phase of a's renewal interval: 0, a third, two thirds, plus the wait for the roles.
		phase := time.Duration(round) * tm.RenewInterval / 3
		wait := time.NewTimer(tm.RenewInterval + phase)
		for done := false; !done; {
			select {
			case <-wait.C:
				done = true
			case <-time.After(5 * time.Millisecond): // polling the campaigns
				drain()
			}
		}
		killed := lead.(*testenv.ZK)
		t.Logf("round %d: kill the leader %s at %s", round, killed.Addr(), ms(time.Now()))
		killed.Kill(t)
		settle := time.Now().Add(3 * tm.TTL)
		for time.Now().Before(settle) {
			drain()
			time.Sleep(5 * time.Millisecond) // polling the campaigns
		}
		killed.Start(t)
		lead, _, _ = roles(t, members)
		drain()
	}
	for _, hl := range holds {
		if hl.r.Term.Err() == nil {
			if err := hl.r.Term.Resign(ctx); err != nil {
				t.Logf("%s: resign: %v", hl.who, err)
			}
		}
	}
}
