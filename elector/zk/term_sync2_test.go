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
// it (these hold), a client of an observer behind an observer master,
// two relays from the leader (a hole: TestTermSync2ObserverMaster), and a
// client of the leader itself while a new leader is elected without it (a
// hole: TestTermSync2OldLeaderLingers).

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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
	errW, errS := stepThenSyncUnderStall(t, "write", func(c *gozk.Conn) error { _, err := c.Set("/probe", []byte("since"), -1); return err })
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
	lead, f, g := rolesF1(t, ms)
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
	waitInLine(t, w, "held", 2, "b queued")
	held := sample(ra.Term, 2*time.Millisecond)
	c := held.landed(t)
	before := ra.Term.ValidUntil()
	release := fault(t, f, relay)
	start := time.Now()
	tmr := time.NewTimer(hold)
	<-tmr.C
	release()
	released := time.Now()
	ms0 := relTo(start)
	rb := electortest.MustLead(t, cb, 30*time.Second, "b")
	dA := held.endedWithin(t, 10*time.Second)
	vA := held.maxValid()
	t.Logf("%s at 0 (a's renewal seen %s, ValidUntil then %s; timing %s) until %s; a's greatest ValidUntil %s, a Done %s (%v); b granted %s (token %#x after %#x); F's mode now %q",
		what, ms0(c), ms0(before), tm, ms0(released), ms0(vA), ms0(dA), ra.Term.Err(), ms0(rb.At), rb.Term.Token, ra.Term.Token, f.Mode())
	twoTerms(t, ra, rb, vA, dA, ms0)
	if !vA.After(released) && rb.At.Before(released) {
		t.Logf("b was granted during the fault: the leader expired a's session while it held F")
	}
	electortest.Resign(t, rb.Term)
}

// startObserverEnsemble starts three voting members (tickTime 200ms,
// syncLimit 5) and an observer, member 4, that reaches the ensemble
// through an observer master (ZooKeeper 3.6+: observerMasterPort): only
// member 1 (F) serves observers, and the observer's link to it goes
// through orelay (down is F→observer). Member 1 reaches the others'
// quorum ports through qrelays, as in startRelayedEnsemble. The observer's
// configuration names member 1 at 127.0.0.2 (the observer master's
// address is the member's host and the observer's observerMasterPort),
// where orelay listens.
func startObserverEnsemble(t *testing.T) (voters []zkMember, obs zkMember, qrelays map[int]*quorumRelay, orelay *quorumRelay) {
	t.Helper()
	java, jar := ownJava(t)
	ports := ownPorts(t, 13)
	client, quorum, election := func(i int) int { return ports[3*(i-1)] }, func(i int) int { return ports[3*(i-1)+1] }, func(i int) int { return ports[3*(i-1)+2] }
	masterPort := ports[12] // member 1's observer master, 127.0.0.1
	relayLn := map[int]net.Listener{}
	for _, i := range []int{2, 3} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		relayLn[i] = ln
	}
	oln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2: %v", err)
	}
	askPort := oln.Addr().(*net.TCPAddr).Port // the observer's observerMasterPort
	qrelays = map[int]*quorumRelay{}
	for i, ln := range relayLn {
		qrelays[i] = startQuorumRelay(t, ln, "127.0.0.1:"+strconv.Itoa(quorum(i)))
	}
	orelay = startQuorumRelay(t, oln, "127.0.0.1:"+strconv.Itoa(masterPort))
	for i := 1; i <= 4; i++ {
		var cfg []string
		switch i {
		case 1:
			cfg = append(cfg, "observerMasterPort="+strconv.Itoa(masterPort))
		case 4:
			cfg = append(cfg, "peerType=observer", "observerMasterPort="+strconv.Itoa(askPort))
		}
		for j := 1; j <= 3; j++ {
			host, q := "127.0.0.1", quorum(j)
			if i == 1 && j != 1 {
				q = relayLn[j].Addr().(*net.TCPAddr).Port
			}
			if i == 4 && j == 1 {
				host = "127.0.0.2"
			}
			cfg = append(cfg, fmt.Sprintf("server.%d=%s:%d:%d", j, host, q, election(j)))
		}
		cfg = append(cfg, fmt.Sprintf("server.4=127.0.0.1:%d:%d:observer", quorum(4), election(4)))
		m := startOwnMember(t, java, jar, i, client(i), 5, cfg)
		if i == 4 {
			obs = m
		} else {
			voters = append(voters, m)
		}
	}
	return voters, obs, qrelays, orelay
}

// TestTermSync2ObserverMaster: the proof's argument counts one relay, the
// follower's on the leader's ping; a client of an observer that follows
// an observer master F (a follower) is two relays away: the observer
// relays its touches to F in its answers to F's pings, and F relays them
// to the leader L in its answers to L's pings, while F forwards the
// observer's requests to L at once. a leads connected to the observer O
// only; b waits on L and G. Right after one of a's renewals lands, the
// F→O direction stalls (held): O gets no ping from F, so it relays
// nothing, and the first thing it sends F is a's next first Sync, which
// F forwards and L answers (its answer held on F→O). Then L→F stalls
// (held) and F→O is released: O answers F's held pings (the touch reaches
// F's touch table) and passes the first Sync's answer on; a's second
// Sync reaches F after the relay, but F forwards it to L at once: the
// touch waits in F's table for L's next ping, which the stall holds. As
// soon as F has forwarded the second Sync, F→L loses everything (F's link
// dies) and L→F is released: the second Sync is answered, the relay lost.
func TestTermSync2ObserverMaster(t *testing.T) {
	outsideAssumptions(t) // the URL names an observer behind an observer master
	voters, o, qrelays, orelay := startObserverEnsemble(t)
	lead, f, g := rolesF1(t, voters)
	qrelay := qrelays[memberID(t, lead)]
	electortest.Eventually(t, time.Minute, "the observer serving through member 1", func() bool {
		if o.Mode() != "observer" {
			return false
		}
		orelay.mu.Lock()
		defer orelay.mu.Unlock()
		return len(orelay.conns) > 0
	})
	t.Logf("leader %d %s, F 1 %s (observer master; its quorum link relayed), G %d %s, observer %s (through F, relayed)",
		memberID(t, lead), lead.Addr(), f.Addr(), memberID(t, g), g.Addr(), o.Addr())

	timing := elector.Timing{TTL: 4 * time.Second}
	a := electortest.DialURL(t, zk.Backend, "zk://"+o.Addr(), elector.Candidate{Election: "obs", ID: "a", Timing: timing})
	b := electortest.DialURL(t, zk.Backend, "zk://"+lead.Addr()+","+g.Addr(), elector.Candidate{Election: "obs", ID: "b", Timing: timing})
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 30*time.Second, "a")
	tm := ra.Term.Timing()
	t.Logf("a leads: token %#x, timing %s", ra.Term.Token, tm)
	cb := electortest.Campaign(ctx, b)
	w := client(t, []string{lead.Addr()})
	waitInLine(t, w, "obs", 2, "b queued")

	held := sample(ra.Term, 2*time.Millisecond)
	c := held.landed(t)
	before := ra.Term.ValidUntil()
	orelay.set(func() { orelay.holdDown = true })
	stall := time.Now()
	ms0 := relTo(stall)
	pause := func(d time.Duration) {
		tmr := time.NewTimer(d)
		<-tmr.C
	}
	pause(50 * time.Millisecond)
	// O answers reads and its client's pings itself: the first thing it
	// sends F now is a's next first Sync.
	_, sync1, ok := orelay.upAfter(orelay.chunks(), time.Now().Add(tm.RenewInterval+time.Second))
	if !ok {
		t.Fatalf("O forwarded nothing to F within an interval of the stall (a's last renewal seen %s)", ms0(c))
	}
	pause(50 * time.Millisecond) // F forwards it, L answers, F queues the answer for O (held)
	qrelay.set(func() { qrelay.holdDown = true })
	pause(50 * time.Millisecond)
	nq := qrelay.chunks()
	orelay.set(func() { orelay.holdDown = false })
	oReleased := time.Now()
	// F answers no ping now: the first thing it sends L is a's second Sync.
	_, sync2, ok := qrelay.upAfter(nq, time.Now().Add(2*time.Second))
	if !ok {
		t.Fatalf("F forwarded nothing to L after O's release")
	}
	qrelay.set(func() {
		qrelay.dropUp = true
		qrelay.dead, qrelay.holdDown = true, false
	})
	released := time.Now()
	var renewed time.Time
	select {
	case renewed = <-held.changed:
	case <-time.After(tm.RenewInterval):
	}
	after := ra.Term.ValidUntil()
	qrelay.set(func() { qrelay.holdDown = true }) // F hears nothing more from L
	t.Logf("F→O stalled at 0 (a's renewal before it seen at %s, ValidUntil then %s); O forwarded the first Sync %s; L→F stalled and F→O released %s; F forwarded the second Sync %s; F→L lost and L→F released %s; a's ValidUntil moved at %s to %s (evidence sent at about %s)",
		ms0(c), ms0(before), ms0(sync1), ms0(oReleased), ms0(sync2), ms0(released), ms0(renewed), ms0(after), ms0(after.Add(-tm.Window())))

	rb := electortest.MustLead(t, cb, 30*time.Second, "b")
	dA := held.endedWithin(t, 10*time.Second)
	vA := held.maxValid()
	t.Logf("a's greatest ValidUntil %s, a Done %s (%v); b granted %s (token %#x after %#x)",
		ms0(vA), ms0(dA), ra.Term.Err(), ms0(rb.At), rb.Term.Token, ra.Term.Token)
	twoTerms(t, ra, rb, vA, dA, ms0)
	electortest.Resign(t, rb.Term)
}

// leaderRelay is a TCP relay in front of the leader's quorum port for one
// follower: down (leader→follower) can be held; up can be cut, and then
// the follower's bytes and its connection's end are lost (the leader's
// side stays open and silent: a partition, not a close). Closed by the
// test's cleanup.
type leaderRelay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu       sync.Mutex
	changed  chan struct{}
	holdDown bool
	cutUp    bool
	closed   bool
	conns    []net.Conn
}

func startLeaderRelay(t *testing.T, ln net.Listener, target string) *leaderRelay {
	r := &leaderRelay{ln: ln, target: target, changed: make(chan struct{})}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

func (r *leaderRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		r.conns = append(r.conns, c, s)
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pump(c, s, true)
		go r.pump(s, c, false)
	}
}

func (r *leaderRelay) pump(src, dst net.Conn, up bool) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		r.mu.Lock()
		for !up && r.holdDown && !r.closed {
			ch := r.changed
			r.mu.Unlock()
			<-ch
			r.mu.Lock()
		}
		cut, closed := up && r.cutUp, r.closed
		r.mu.Unlock()
		if closed {
			return
		}
		if n > 0 && !cut {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			_ = src.Close()
			if !cut {
				_ = dst.Close()
			}
			return
		}
	}
}

func (r *leaderRelay) set(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *leaderRelay) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.changed)
	r.changed = make(chan struct{})
	conns := r.conns
	r.mu.Unlock()
	_ = r.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	r.wg.Wait()
}

// startEnsembleToward3 starts three members (tickTime 200ms, syncLimit 15)
// whose every link with member 3 (the highest id, which leads a fresh
// ensemble) goes through a leaderRelay: relays["q1"], ["q2"] carry members
// 1 and 2's quorum links to 3 (down: 3→follower); ["e1"], ["e2"] their
// election connections to 3, and ["3e1"], ["3e2"] 3's to them.
func startEnsembleToward3(t *testing.T) (ms []zkMember, relays map[string]*leaderRelay) {
	t.Helper()
	java, jar := ownJava(t)
	ports := ownPorts(t, 9)
	client, quorum, election := func(i int) int { return ports[3*(i-1)] }, func(i int) int { return ports[3*(i-1)+1] }, func(i int) int { return ports[3*(i-1)+2] }
	targets := map[string]int{"q1": quorum(3), "q2": quorum(3), "e1": election(3), "e2": election(3), "3e1": election(1), "3e2": election(2)}
	relays = map[string]*leaderRelay{}
	via := map[string]int{}
	for name, target := range targets {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		via[name] = ln.Addr().(*net.TCPAddr).Port
		relays[name] = startLeaderRelay(t, ln, "127.0.0.1:"+strconv.Itoa(target))
	}
	for i := 1; i <= 3; i++ {
		var cfg []string
		for j := 1; j <= 3; j++ {
			q, e := quorum(j), election(j)
			switch {
			case i != 3 && j == 3:
				q, e = via["q"+strconv.Itoa(i)], via["e"+strconv.Itoa(i)]
			case i == 3 && j != 3:
				e = via["3e"+strconv.Itoa(j)]
			}
			cfg = append(cfg, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", j, q, e))
		}
		ms = append(ms, startOwnMember(t, java, jar, i, client(i), 15, cfg))
	}
	return ms, relays
}

// TestTermSync2OldLeaderLingers: a leads connected to the ensemble's
// leader L (member 3) itself, where a touch counts at once and L answers
// Syncs without its quorum; b waits on the other two; another client of
// member 2 writes (Syncs) steadily. The leader→follower directions stall
// (held): the followers hear nothing, give up on L after
// syncLimit·tickTime and elect a new leader L', which gives every session
// a full timeout from its own start. L counts a follower as synced while
// ANY packet of it arrived within syncLimit ticks, and member 2 forwarded
// its client's Syncs until it gave up; from shortly before that the
// partition is whole (member 2's bytes and its connection's end are lost),
// so L leads on for up to syncLimit·tickTime after L' began, and a's
// renewals at L go on. a cannot reach L' (its link to L is closed once L
// steps down): L' expires a's session a timeout after its start. The
// election links with L are lost from the start (else the followers,
// hearing that L still leads, go back to it). syncLimit 15: the followers
// give up at 3s; L' leads from about 3.5s, L until about 5.2s.
func TestTermSync2OldLeaderLingers(t *testing.T) {
	ms, relays := startEnsembleToward3(t)
	lead, f, g := roles(t, ms)
	if memberID(t, lead) != 3 {
		t.Skipf("member %d leads, not 3", memberID(t, lead))
	}
	m1, m2 := f, g
	if memberID(t, f) == 2 {
		m1, m2 = g, f
	}
	timing := elector.Timing{TTL: 2 * time.Second}
	pa := faultproxy.Start(t, lead.Addr())
	a := electortest.DialURL(t, zk.Backend, "zk://"+pa.Addr(), elector.Candidate{Election: "linger", ID: "a", Timing: timing})
	b := electortest.DialURL(t, zk.Backend, "zk://"+m1.Addr()+","+m2.Addr(), elector.Candidate{Election: "linger", ID: "b", Timing: timing})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 30*time.Second, "a")
	tm := ra.Term.Timing()
	cb := electortest.Campaign(ctx, b)
	w := client(t, []string{m1.Addr()})
	waitInLine(t, w, "linger", 2, "b queued")
	// Member 2's other client: a Sync every 50ms, each in flight until
	// answered or the client closes.
	c2 := client(t, []string{m2.Addr()})
	if _, err := c2.Sync("/"); err != nil { // its session is open
		t.Fatalf("sync on member 2: %v", err)
	}
	var syncs sync.WaitGroup
	stop := make(chan struct{})
	syncs.Add(1)
	go func() {
		defer syncs.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			syncs.Add(1)
			go func() {
				defer syncs.Done()
				_, err := c2.Sync("/")
				_ = err // unanswered once member 2 gives up on L: expected
			}()
		}
	}()
	defer func() { close(stop); c2.Close(); syncs.Wait() }()

	held := sample(ra.Term, 2*time.Millisecond)
	// The election links with L are lost from the start (a partition):
	// the followers cannot hear that L still leads.
	for name, r := range relays {
		r.set(func() { r.holdDown, r.cutUp = true, name[0] != 'q' })
	}
	start := time.Now()
	ms0 := relTo(start)
	// The followers give up 3s (syncLimit·tickTime) after the last ping
	// they read: the partition is whole a little before.
	cutAt := time.NewTimer(2850 * time.Millisecond)
	<-cutAt.C
	for _, r := range relays {
		r.set(func() { r.cutUp = true })
	}
	var newLeader, stepped time.Time
	electortest.Eventually(t, 20*time.Second, "L steps down", func() bool {
		if newLeader.IsZero() && (m1.Mode() == "leader" || m2.Mode() == "leader") {
			newLeader = time.Now()
		}
		if lead.Mode() != "leader" {
			stepped = time.Now()
			return true
		}
		return false
	})
	_ = pa.Close() // a's link to L: no reconnection reaches L'
	if b, err := os.ReadFile(lead.LogPath()); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.Contains(line, "GOODBYE") { // L drops a follower
				t.Logf("L's log: %s", line)
			}
		}
	}
	vAtStep := ra.Term.ValidUntil()
	t.Logf("leader→followers and the election links held at 0, the partition whole at 2.85s; a new leader seen %s; L stepped down (seen) %s, a's ValidUntil then %s (timing %s)",
		ms0(newLeader), ms0(stepped), ms0(vAtStep), tm)

	rb := electortest.MustLead(t, cb, 30*time.Second, "b")
	dA := held.endedWithin(t, 10*time.Second)
	vA := held.maxValid()
	t.Logf("a's greatest ValidUntil %s, a Done %s (%v); b granted %s (token %#x after %#x)",
		ms0(vA), ms0(dA), ra.Term.Err(), ms0(rb.At), rb.Term.Token, ra.Term.Token)
	twoTerms(t, ra, rb, vA, dA, ms0)
	electortest.Resign(t, rb.Term)
}
