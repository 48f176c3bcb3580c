package zk_test

// Attacks on the two-Sync proof (term.go prove, lead and relayed): a
// renewal touches, waits lag after the touch's answer, Syncs, and Syncs
// again after that answer; a term's start writes and Syncs once after the
// write's answer. The argument rests on ZooKeeper 3.8's ordering (read in
// the jar): the follower F answers a ping (Learner.ping: the touch table's
// snapshot, written and flushed by the thread that reads the leader's
// stream) before it reads the next packet, a Sync's answer among them;
// the leader L queues pings and Sync answers on one queue per follower
// (LearnerHandler.queuedPackets), and touches the sessions a ping answer
// carries before it reads F's next packet. These tests put real faults at
// the argument's steps: the write standing for the first Sync, the
// F→L direction held past the session's expiry, and F's JVM stopped past
// it.

import (
	"context"
	"syscall"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/zk"
	"github.com/electd/electd/internal/faultproxy"
)

// TestTermSync2WriteThenSyncUnderStall is lead's path with a plain client
// connected only to F: a touch (Exists), lag later a write (Set) forwarded
// while the leader→F direction stalls, then the stall released with
// F→leader lost. The write is answered (F gets the held pings, its
// relays lost, then the proposal and its commit) though the touch never
// reached the leader: a write proves no more than one Sync. The Sync lead
// sends after the write's answer must fail: F forwards it after the
// relays it wrote on the pings that preceded the commit.
func TestTermSync2WriteThenSyncUnderStall(t *testing.T) {
	ms, relays := startRelayedEnsemble(t, 5)
	lead, f, g := roles(t, ms)
	if memberID(t, f) != 1 {
		f, g = g, f
	}
	if memberID(t, f) != 1 {
		t.Skipf("member 1 leads (%s): no relayed follower", lead.Addr())
	}
	_ = g
	relay := relays[memberID(t, lead)]
	c := client(t, []string{f.Addr()})
	if _, err := c.Create("/probe", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	relay.set(func() { relay.holdDown = true })
	stall := time.Now()
	quiet := time.NewTimer(50 * time.Millisecond)
	<-quiet.C
	n0 := relay.chunks()
	touched := time.Now()
	if _, _, err := c.Exists("/probe"); err != nil {
		t.Fatalf("touch: %v", err)
	}
	lag := 200*time.Millisecond/2 + 200*time.Millisecond/4 + 20*time.Millisecond
	wait := time.NewTimer(lag)
	<-wait.C
	wrote := make(chan error, 1)
	go func() { _, err := c.Set("/probe", []byte("since"), -1); wrote <- err }()
	if _, _, ok := relay.upAfter(n0, time.Now().Add(2*time.Second)); !ok {
		t.Fatal("F did not forward the write")
	}
	relay.set(func() { relay.dropUp, relay.dead, relay.holdDown = true, true, false })
	released := time.Now()
	var errW error
	select {
	case errW = <-wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the write never returned")
	}
	answered := time.Now()
	_, errS := c.Sync("/probe")
	ms0 := func(x time.Time) string { return x.Sub(stall).Round(time.Millisecond).String() }
	t.Logf("stall at 0; touch sent %s; write sent %s, F forwarded it, stall released with F→leader lost %s, write answered %s: %v; the Sync after it (returned %s): %v",
		ms0(touched), ms0(touched.Add(lag)), ms0(released), ms0(answered), errW, ms0(time.Now()), errS)
	if errW != nil {
		t.Logf("the write failed (%v): the premise (a write answered without its relay) did not hold", errW)
	}
	if errW == nil && errS == nil {
		t.Errorf("HOLE: the Sync after the write succeeded though F's relays were lost")
	}
}

// TestTermSync2UpHeldPastExpiry: a leads connected to F, b waits on the
// others. Right after a renewal lands, the F→leader direction of F's
// quorum link is held (nothing lost) for longer than the session timeout
// but less than syncLimit·tickTime, so the leader keeps F and expires a's
// session meanwhile, then released: the leader gets, in order, F's ping
// answers (touches of an expired session) and the Syncs a sent during the
// hold. A Sync answered then must not reach a (the commit of the
// session's close comes first on leader→F, and F closes the connection).
func TestTermSync2UpHeldPastExpiry(t *testing.T) {
	followerFaultPastExpiry(t, "F→leader held", func(t *testing.T, f zkMember, relay *quorumRelay) func() {
		relay.set(func() { relay.holdUp = true })
		return func() { relay.set(func() { relay.holdUp = false }) }
	})
}

// TestTermSync2FollowerStopped is the same with F's JVM stopped (SIGSTOP)
// right after a renewal lands, and continued past the session's expiry
// (within syncLimit·tickTime): on resuming, F's threads race (its request
// path forwards the Syncs a sent meanwhile, its leader's stream brings
// the pings and the close's commit).
func TestTermSync2FollowerStopped(t *testing.T) {
	followerFaultPastExpiry(t, "F stopped", func(t *testing.T, f zkMember, relay *quorumRelay) func() {
		pid := f.Pid()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("stop F (pid %d): %v", pid, err)
		}
		cont := func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("continue F (pid %d): %v", pid, err)
			}
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		return cont
	})
}

// followerFaultPastExpiry runs fault (which returns its release) right
// after one of a's renewals lands and releases it hold later: ttl 2s, the
// ensemble's syncLimit 15 (3s), hold 2.7s (past the session's expiry at
// the leader, rounded up to its tick, and within syncLimit·tickTime: the
// leader keeps F). b must be granted after a's greatest ValidUntil and
// a's Done, with a greater token.
func followerFaultPastExpiry(t *testing.T, what string, fault func(t *testing.T, f zkMember, relay *quorumRelay) func()) {
	const hold = 2700 * time.Millisecond
	ms, relays := startRelayedEnsemble(t, 15)
	lead, f, g := roles(t, ms)
	if memberID(t, f) != 1 {
		f, g = g, f
	}
	if memberID(t, f) != 1 {
		t.Skipf("member 1 leads (%s): no relayed follower", lead.Addr())
	}
	relay := relays[memberID(t, lead)]
	timing := elector.Timing{TTL: 2 * time.Second}
	// a reaches only F (the others' proxies are closed: refused), as in
	// stallThenLoseRelay.
	pl, pg := faultproxy.Start(t, lead.Addr()), faultproxy.Start(t, g.Addr())
	_ = pl.Close()
	_ = pg.Close()
	a := electortest.DialURL(t, zk.Backend, "zk://"+pl.Addr()+","+f.Addr()+","+pg.Addr(), elector.Candidate{Election: "held", ID: "a", Timing: timing})
	b := electortest.DialURL(t, zk.Backend, "zk://"+lead.Addr()+","+g.Addr(), elector.Candidate{Election: "held", ID: "b", Timing: timing})
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 30*time.Second, "a")
	tm := ra.Term.Timing()
	cb := electortest.Campaign(ctx, b)
	w := client(t, []string{lead.Addr()})
	electortest.Eventually(t, 10*time.Second, "b queued", func() bool {
		names, _, err := w.Children("/electd/elections/held")
		return err == nil && len(names) == 2
	})
	held := sample(ra.Term, 2*time.Millisecond)
	for drained := false; !drained; {
		select {
		case <-held.changed:
		default:
			drained = true
		}
	}
	var c time.Time
	select {
	case c = <-held.changed:
	case <-time.After(5 * time.Second):
		t.Fatal("a does not renew")
	}
	before := ra.Term.ValidUntil()
	release := fault(t, f, relay)
	start := time.Now()
	tmr := time.NewTimer(hold)
	<-tmr.C
	release()
	released := time.Now()
	ms0 := func(x time.Time) string {
		if x.IsZero() {
			return "never"
		}
		return x.Sub(start).Round(time.Millisecond).String()
	}
	rb := electortest.MustLead(t, cb, 30*time.Second, "b")
	var dA time.Time
	select {
	case dA = <-held.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a's term never ended")
	}
	vA := held.maxValid()
	t.Logf("%s at 0 (a's renewal seen %s, ValidUntil then %s; timing %s) until %s; a's greatest ValidUntil %s, a Done %s (%v); b granted %s (token %#x after %#x); F's mode now %q",
		what, ms0(c), ms0(before), tm, ms0(released), ms0(vA), ms0(dA), ra.Term.Err(), ms0(rb.At), rb.Term.Token, ra.Term.Token, f.Mode())
	if rb.Term.Token <= ra.Term.Token {
		t.Errorf("HOLE: token %#x after %#x", rb.Term.Token, ra.Term.Token)
	}
	end := vA
	if dA.After(end) {
		end = dA
	}
	if rb.At.Before(end) {
		t.Errorf("HOLE: two valid terms: b granted at %s while a was valid until %s (Done at %s): overlap %s",
			ms0(rb.At), ms0(vA), ms0(dA), end.Sub(rb.At).Round(time.Millisecond))
	}
	if !vA.After(released) && rb.At.Before(released) {
		t.Logf("b was granted during the fault: the leader expired a's session while it held F")
	}
	electortest.Resign(t, rb.Term)
}
