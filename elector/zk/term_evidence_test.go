package zk_test

// Attacks on a renewal's evidence (term.go prove, evidence.go): the rule
// says that a Sync sent on the same connection at least lag after the
// answer to a request of ours shows that the ensemble's leader applied
// that request's touch first, because the follower F relays its touches
// in its answers to the leader's pings (every tickTime/2) on the stream
// the Sync is forwarded on. That holds only while F RECEIVES a ping
// within lag of every touch: the leader sending its pings on time is not
// enough. A stall of the leader→F direction of the quorum link (packet
// loss and TCP's retransmission backoff; F tolerates syncLimit·tickTime
// of silence) lets F forward the Sync before it relays the touch; the
// leader answers the Sync (it does not touch the session for it), and
// the relay F sends when the stall ends can be lost with F's link.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/zk"
)

// quorumRelay is a TCP relay in front of one member's quorum port, used by
// one other member (F) to reach it: each direction is controlled on its
// own, which faultproxy (a cut holds both) cannot do. down is the
// target→F direction, up F→target. Its goroutines end with close.
type quorumRelay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every state change and every up chunk
	holdDown bool          // target→F bytes are not delivered (held, in order)
	dropUp   bool          // F→target bytes are read and discarded
	holdUp   bool          // F→target bytes are not delivered (held, in order)
	dead     bool          // new connections are accepted and left silent
	closed   bool
	upChunks int // F→target chunks delivered
	conns    []net.Conn
}

func startQuorumRelay(t *testing.T, ln net.Listener, target string) *quorumRelay {
	r := &quorumRelay{ln: ln, target: target, changed: make(chan struct{})}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

func (r *quorumRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			_ = c.Close()
			return
		}
		r.conns = append(r.conns, c)
		dead := r.dead
		r.mu.Unlock()
		if dead {
			continue // held silent until close
		}
		s, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, s)
		r.mu.Unlock()
		r.wg.Add(2)
		go r.pump(c, s, true)
		go r.pump(s, c, false)
	}
}

// pump copies src to dst: up (F→target) unless dropped, down
// (target→F), each once not held.
func (r *quorumRelay) pump(src, dst net.Conn, up bool) {
	defer r.wg.Done()
	defer func() { _ = src.Close(); _ = dst.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			for ((!up && r.holdDown) || (up && r.holdUp)) && !r.closed {
				ch := r.changed
				r.mu.Unlock()
				<-ch
				r.mu.Lock()
			}
			drop, closed := up && r.dropUp, r.closed
			if up && !drop {
				r.upChunks++
				close(r.changed)
				r.changed = make(chan struct{})
			}
			r.mu.Unlock()
			if closed {
				return
			}
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *quorumRelay) set(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
	close(r.changed)
	r.changed = make(chan struct{})
}

// upAfter waits (until deadline) for F→target chunks beyond n, and
// returns the count and when it saw the first of them.
func (r *quorumRelay) upAfter(n int, deadline time.Time) (int, time.Time, bool) {
	for {
		r.mu.Lock()
		got, ch := r.upChunks, r.changed
		r.mu.Unlock()
		if got > n {
			return got, time.Now(), true
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return got, time.Time{}, false
		}
		tm := time.NewTimer(wait)
		select {
		case <-ch:
		case <-tm.C:
		}
		tm.Stop()
	}
}

func (r *quorumRelay) chunks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.upChunks
}

func (r *quorumRelay) close() {
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

// startRelayedEnsemble starts three members (tickTime 200ms, the given
// syncLimit) whose member 1 reaches members 2 and 3's quorum ports through
// quorumRelays (relays[2], relays[3]); the others talk directly. Member 1
// has the lowest id, so a fresh ensemble elects 2 or 3.
func startRelayedEnsemble(t *testing.T, syncLimit int) (ms []zkMember, relays map[int]*quorumRelay) {
	t.Helper()
	java, jar := ownJava(t)
	relayLn := map[int]net.Listener{}
	for _, i := range []int{2, 3} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		relayLn[i] = ln
	}
	ports := ownPorts(t, 9)
	var client, quorum, election [4]int
	for i := 1; i <= 3; i++ {
		client[i], quorum[i], election[i] = ports[3*i-3], ports[3*i-2], ports[3*i-1]
	}
	relays = map[int]*quorumRelay{}
	for i, ln := range relayLn {
		relays[i] = startQuorumRelay(t, ln, "127.0.0.1:"+strconv.Itoa(quorum[i]))
	}
	for i := 1; i <= 3; i++ {
		var servers []string
		for j := 1; j <= 3; j++ {
			q := quorum[j]
			if i == 1 && j != 1 {
				q = relayLn[j].Addr().(*net.TCPAddr).Port
			}
			servers = append(servers, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", j, q, election[j]))
		}
		ms = append(ms, startOwnMember(t, java, jar, i, client[i], syncLimit, servers))
	}
	return ms, relays
}

// TestTermEvidenceLeaderToFollowerStall (syncLimit 15: F bears 3s of
// silence from its leader; the longest renewal interval ttl 4s allows with the renewal lag of a 200ms tick: 1.85s).
func TestTermEvidenceLeaderToFollowerStall(t *testing.T) {
	stallThenLoseRelay(t, 15, 1850*time.Millisecond, false)
}

// TestTermEvidenceStallEachWay loses no byte: the F→leader direction
// stalls in its turn as the leader→F direction recovers, and stays
// stalled until the leader gives up on F (syncLimit·tickTime of silence)
// and closes the link with F's relay of the touch still held in it.
// Delays alone, on an ensemble's quorum link, no process paused.
func TestTermEvidenceStallEachWay(t *testing.T) {
	stallThenLoseRelay(t, 5, 0, true)
}

// TestTermEvidenceLeaderToFollowerStallDefaults is the same on testenv's
// syncLimit (5: 1s of silence) with electd's default renewal interval
// (ttl/5 = 800ms): the stall needed is one interval.
func TestTermEvidenceLeaderToFollowerStallDefaults(t *testing.T) {
	stallThenLoseRelay(t, 5, 0, false)
}

// stallThenLoseRelay: a leads connected to member 1 (F), b waits
// connected to the other two. Right after one of a's renewals completes,
// the leader→F direction of F's quorum link stalls (held, not lost: F sees
// silence, as under TCP retransmission backoff) while F→leader flows. a's
// next renewal touches (a read F answers itself), waits lag, Syncs: F
// forwards the Sync at once; the leader answers it (into the stall). As
// soon as the forwarded Sync has passed, the F→leader direction loses
// everything from then on (F's link dies) and the stall is released: F
// gets the held pings (its answers, with the touch, are lost) and the
// Sync's answer, and a's renewal succeeds on the touch's send time. The
// leader last heard of a's session before the stall: it expires it a
// session timeout after that, and b is granted while a's ValidUntil,
// counted from the touch, is still ahead.
// With holdUp, F→leader is held instead of lost (TestTermEvidenceStallEachWay).
func stallThenLoseRelay(t *testing.T, syncLimit int, renew time.Duration, holdUp bool) {
	ms, relays := startRelayedEnsemble(t, syncLimit)
	lead, f, g := rolesF1(t, ms)
	lid := memberID(t, lead)
	relay := relays[lid]
	t.Logf("ensemble (tickTime 200ms, syncLimit %d: F bears %s of silence): leader %d %s, F 1 %s (its quorum link to the leader relayed), G %d %s",
		syncLimit, time.Duration(syncLimit)*200*time.Millisecond, lid, lead.Addr(), f.Addr(), memberID(t, g), g.Addr())

	timing := elector.Timing{TTL: 4 * time.Second, RenewInterval: renew}
	// a's URL names all three members, as a deployment's would, but a and
	// F are on one side of a zone partition that the stall ends in: a's
	// links to the other two go through proxies closed from the start
	// (refused, as in TestTermFollowerPartitionedZone), so a's client
	// connects to F and, once F gives up, to no one.
	aURL := zoneURL(t, lead, f, g)
	a := electortest.DialURL(t, zk.Backend, aURL, elector.Candidate{Election: "stall", ID: "a", Timing: timing})
	b := electortest.DialURL(t, zk.Backend, "zk://"+lead.Addr()+","+g.Addr(), elector.Candidate{Election: "stall", ID: "b", Timing: timing})
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 30*time.Second, "a")
	tm := ra.Term.Timing()
	t.Logf("a leads: token %#x, timing %s", ra.Term.Token, tm)
	cb := electortest.Campaign(ctx, b)
	w := client(t, []string{lead.Addr()})
	waitInLine(t, w, "stall", 2, "b queued")
	deleted := watchFirst(t, w, "/electd/elections/stall")

	held := sample(ra.Term, 2*time.Millisecond)
	// The stall starts right after a renewal seen as it lands.
	c := held.landed(t)
	before := ra.Term.ValidUntil()
	// The answer to F's last ping may still be on its way: count F's
	// chunks from a moment later.
	relay.set(func() { relay.holdDown = true })
	stall := time.Now()
	ms0 := relTo(stall)
	quiet := time.NewTimer(50 * time.Millisecond)
	<-quiet.C
	n0 := relay.chunks()
	// The next renewal's Sync is the first thing F sends its leader.
	_, fwd, ok := relay.upAfter(n0, time.Now().Add(tm.RenewInterval+time.Second))
	if !ok {
		t.Fatalf("F forwarded nothing to its leader within an interval of the stall (a's last renewal seen %s)", ms0(c))
	}
	relay.set(func() {
		relay.dropUp, relay.holdUp = !holdUp, holdUp
		relay.dead, relay.holdDown = true, false
	})
	released := time.Now()
	var renewed time.Time
	select {
	case renewed = <-held.changed:
	case <-time.After(tm.RenewInterval):
	}
	after := ra.Term.ValidUntil()
	if !holdUp {
		// F hears nothing more from its leader: it gives up on it after
		// syncLimit·tickTime and drops a's connection; it cannot rejoin.
		relay.set(func() { relay.holdDown = true })
	}
	t.Logf("stall at 0 (a's renewal before it seen at %s, ValidUntil then %s); F forwarded a chunk (the Sync) at %s; F→leader %s and the stall released at %s; a's ValidUntil moved at %s to %s (evidence sent at about %s)",
		ms0(c), ms0(before), ms0(fwd), map[bool]string{false: "lost", true: "held"}[holdUp], ms0(released), ms0(renewed), ms0(after), ms0(after.Add(-tm.Window())))

	rb := electortest.MustLead(t, cb, 30*time.Second, "b")
	dA := held.endedWithin(t, 10*time.Second)
	gone := seenWithin(deleted, 5*time.Second)
	vA := held.maxValid()
	t.Logf("a's greatest ValidUntil %s, a Done %s (%v); a's node deleted (seen on the leader) %s; b granted %s (token %#x after %#x)",
		ms0(vA), ms0(dA), ra.Term.Err(), ms0(gone), ms0(rb.At), rb.Term.Token, ra.Term.Token)
	twoTerms(t, ra, rb, vA, dA, ms0)
	electortest.Resign(t, rb.Term)
}

// TestTermEvidenceSecondSyncUnderStall is the fault above with a plain
// client connected only to F, to show what does prove the relay: a touch
// (Exists), lag later a Sync (forwarded while the leader→F direction
// stalls), then the stall released with F→leader lost. The first Sync
// succeeds though F's relay of the touch never reached the leader (the
// hole). A second Sync, sent after the first one's answer, is forwarded
// after the relays F wrote on receiving the pings that preceded the first
// Sync's answer (the leader sent one in the lag between the touch and the
// first Sync: its own ping period, not the link's delivery): it completes
// only if those relays reached the leader, and here it fails.
func TestTermEvidenceSecondSyncUnderStall(t *testing.T) {
	err1, err2 := stepThenSyncUnderStall(t, "first Sync", func(c *gozk.Conn) error { _, err := c.Sync("/probe"); return err })
	if err1 != nil {
		t.Errorf("the first Sync failed (%v): the hole's premise did not hold", err1)
	}
	if err2 == nil {
		t.Errorf("the second Sync succeeded though F's relays were lost")
	}
}

// stepThenSyncUnderStall is the fault of TestTermEvidenceSecondSyncUnderStall
// for a plain client connected only to F: a touch, lag later step
// (forwarded while the leader→F direction stalls), then the stall released
// with F→leader lost, and a Sync sent after step's answer. It returns
// step's error and the Sync's.
func stepThenSyncUnderStall(t *testing.T, what string, step func(c *gozk.Conn) error) (stepErr, syncErr error) {
	t.Helper()
	ms, relays := startRelayedEnsemble(t, 5)
	lead, f, _ := rolesF1(t, ms)
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
	first := make(chan error, 1)
	go func() { first <- step(c) }()
	if _, _, ok := relay.upAfter(n0, time.Now().Add(2*time.Second)); !ok {
		t.Fatalf("F did not forward the %s", what)
	}
	relay.set(func() { relay.dropUp, relay.dead, relay.holdDown = true, true, false })
	released := time.Now()
	select {
	case stepErr = <-first:
	case <-time.After(5 * time.Second):
		t.Fatalf("the %s never returned", what)
	}
	answered := time.Now()
	_, syncErr = c.Sync("/probe")
	ms0 := relTo(stall)
	t.Logf("stall at 0; touch sent %s; %s sent %s, F forwarded it, stall released with F→leader lost %s, answered %s: %v; the Sync after it (returned %s): %v",
		ms0(touched), what, ms0(touched.Add(lag)), ms0(released), ms0(answered), stepErr, ms0(time.Now()), syncErr)
	return stepErr, syncErr
}
