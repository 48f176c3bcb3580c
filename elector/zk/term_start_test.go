package zk_test

// Adversarial tests of a term's start and of the timeout the deadline runs
// on (term.go lead, session.go sniffed, evidence.go tickOf): members of one
// ensemble configured differently, and a reconnection whose handshake
// answer the client never reads.

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/zk"
)

// Modes of a switchProxy, chosen per accepted connection.
const (
	refuse  = iota // accept and close at once
	forward        // both ways
	deaf           // the client's bytes reach the server; the server's answers are read and dropped
	slow           // as forward, the server's answers delivered slowDown late
)

// slowDown is how late a switchProxy in mode slow delivers the server's
// bytes.
const slowDown = 2 * time.Second

// switchProxy forwards connections to target in its current mode; drop
// closes every connection open. Close (in t.Cleanup) waits for its
// goroutines.
type switchProxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu       sync.Mutex
	mode     int
	conns    map[net.Conn]struct{}
	accepted [4]int          // connections accepted per mode
	heard    []time.Duration // the session timeouts of the handshake answers in modes deaf and slow
	heardAt  []time.Time     // when
	closed   bool
}

func startSwitchProxy(t *testing.T, target string, mode int) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{target: target, ln: ln, mode: mode, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *switchProxy) addr() string { return p.ln.Addr().String() }

func (p *switchProxy) set(mode int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

// count is how many connections the proxy accepted in mode.
func (p *switchProxy) count(mode int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted[mode]
}

// answers are the session timeouts of the handshake answers the proxy
// heard (modes deaf and slow), and when, as rel renders it.
func (p *switchProxy) answers(rel func(time.Time) string) ([]time.Duration, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var at []string
	for _, h := range p.heardAt {
		at = append(at, rel(h))
	}
	return p.heard, at
}

// drop closes every connection open now.
func (p *switchProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close() // closing is the fault; a second close's error says nothing
	}
}

func (p *switchProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close() // stops accept
	p.drop()
	p.wg.Wait()
}

// track registers c (false once the proxy is closed).
func (p *switchProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *switchProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close() // done with it
}

func (p *switchProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		mode := p.mode
		p.accepted[mode]++
		p.mu.Unlock()
		if mode == refuse || !p.track(c) {
			_ = c.Close() // the refusal
			continue
		}
		s, ok := p.dial(c, p.target)
		if !ok {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.relay(c, s, mode)
		}()
	}
}

// dial connects the accepted connection c to target; when it cannot (or
// the proxy closed meanwhile) it closes c and returns false.
func (p *switchProxy) dial(c net.Conn, target string) (net.Conn, bool) {
	s, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil || !p.track(s) {
		if s != nil {
			_ = s.Close() // proxy closed meanwhile
		}
		p.untrack(c)
		return nil, false
	}
	return s, true
}

// relay passes c's bytes to s (in a goroutine of its own) and s's to c
// as mode says, until either side closes; then both are closed.
func (p *switchProxy) relay(c, s net.Conn, mode int) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(s, c) // ends when either side closes
		p.untrack(s)
		p.untrack(c)
	}()
	switch mode {
	case deaf:
		p.swallow(s)
	case slow:
		p.late(c, s)
	default:
		_, _ = io.Copy(c, s) // ends when either side closes
	}
	p.untrack(s)
	p.untrack(c)
}

// late delivers the server's bytes to c, each slowDown after it was
// read, noting the timeout its handshake answer granted.
func (p *switchProxy) late(c, s net.Conn) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 64)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(q)
		var head []byte
		for {
			b := make([]byte, 4096)
			n, err := s.Read(b)
			if n > 0 {
				if len(head) < 20 {
					head = append(head, b[:min(n, 20-len(head))]...)
					if len(head) == 20 {
						p.mu.Lock()
						p.heard = append(p.heard, time.Duration(int32(binary.BigEndian.Uint32(head[8:12])))*time.Millisecond)
						p.heardAt = append(p.heardAt, time.Now())
						p.mu.Unlock()
					}
				}
				q <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		// The latency is the fault being simulated, not a synchronisation.
		time.Sleep(time.Until(ch.at.Add(slowDown)))
		if _, err := c.Write(ch.b); err != nil {
			p.untrack(s) // ends the reader
			for range q {
			}
			return
		}
	}
}

// swallow reads the server's bytes and drops them, noting the timeout its
// handshake answer granted.
func (p *switchProxy) swallow(s net.Conn) {
	head := make([]byte, 20)
	if _, err := io.ReadFull(s, head); err == nil {
		ms := int32(binary.BigEndian.Uint32(head[8:12]))
		p.mu.Lock()
		p.heard = append(p.heard, time.Duration(ms)*time.Millisecond)
		p.heardAt = append(p.heardAt, time.Now())
		p.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, s) // until closed
}

// TestTermStartLowerMaxTimeoutAnswerLost: members may differ in
// maxSessionTimeout (doc.go states no assumption about it; session.go
// exists for it: "a reconnection to a member that answers less ends the
// session's terms"). But the ensemble applies the smaller timeout as soon
// as that member accepts the reconnection, not when the client reads the
// answer: the leader's SessionTrackerImpl.touchSession and
// ExpiryQueue.update (ZooKeeper 3.8.0 as installed, read with javap) move a
// session's expiry to now + the timeout of the latest touch, EARLIER too,
// and the follower's REVALIDATE is such a touch, with the timeout that
// member negotiated. If that handshake's answer never reaches the client
// (a link that fails one way, or just slowly), the client never learns of
// the smaller timeout, its term keeps the deadline it computed on the
// larger one, and the ensemble expires the session the small timeout
// after the reconnection.
//
// Setup: three members, tickTime 200ms; member 3 has
// maxSessionTimeout=400. a leads with --ttl 4s through proxy X to member 1
// (negotiated 4s); proxy Y to member 3 refuses until the fault. b queues
// on members 1 and 2. Fault: X drops a's connection and refuses; once Y
// has refused a's client again (its next dial comes a second later, after
// member 1 relayed a's last touch, 4s, to the leader), Y forwards a's
// handshake to member 3 but drops its answer. Expected now:
// a's session expires at the ensemble about 400ms after member 3 saw the
// handshake, b is granted, and a's ValidUntil (up to 4s·0.99 after a's
// last renewal) is still ahead: two valid terms.
func TestTermStartLowerMaxTimeoutAnswerLost(t *testing.T) { lowerMaxTimeout(t, deaf) }

// TestTermStartLowerMaxTimeoutAnswerLate is the same with nothing lost:
// member 3's answers reach a's client slowDown (2s) late, on a link slow
// one way. The client reads the smaller timeout and its term ends
// (session.go sniffed), but only 2s after member 3 applied it: the
// ensemble expired the session and b was granted in between. Expected
// now: a's Done (and ValidUntil, clamped to it) after b's grant.
func TestTermStartLowerMaxTimeoutAnswerLate(t *testing.T) { lowerMaxTimeout(t, slow) }

// lowerMaxTimeout is the race of the two tests above; mode is Y's once
// the fault begins.
func lowerMaxTimeout(t *testing.T, mode int) {
	ms := startMembersWith(t, map[int][]string{2: {"maxSessionTimeout=400"}})
	lead, _, _ := roles(t, ownMembers(ms))
	t.Logf("ensemble: member 1 %s %q, member 2 %s %q, member 3 %s %q (maxSessionTimeout=400); leader %s",
		ms[0].Addr(), ms[0].Mode(), ms[1].Addr(), ms[1].Mode(), ms[2].Addr(), ms[2].Mode(), lead.Addr())
	x := startSwitchProxy(t, ms[0].Addr(), forward)
	y := startSwitchProxy(t, ms[2].Addr(), refuse)
	timing := elector.Timing{TTL: 4 * time.Second}
	a := electortest.DialURL(t, zk.Backend, "zk://"+x.addr()+","+y.addr(), elector.Candidate{Election: "maxto", ID: "a", Timing: timing})
	b := electortest.DialURL(t, zk.Backend, "zk://"+ms[0].Addr()+","+ms[1].Addr(), elector.Candidate{Election: "maxto", ID: "b", Timing: timing})
	ra, cb, qc := leadThenQueue(t, a, b, "maxto", 4*time.Second, " (it reached member 3 first?)", []string{ms[0].Addr(), ms[1].Addr()})
	// a's node's deletion, seen on member 1: the ensemble expired a's session.
	deleted := watchFirst(t, qc, "/electd/elections/maxto")
	held := sample(ra.Term, 5*time.Millisecond)
	// Two renewals in steady state.
	held.renewals(t, 2, 5*time.Second, "")
	electortest.StillWaiting(t, cb, "b")

	// The fault: X drops a's connection and refuses. Y goes deaf only once
	// a's client has been refused by Y too: its next dial comes after
	// go-zookeeper's pause of a second at the end of its host list, by
	// which time member 1 has relayed a's last touch (4s) to the leader,
	// so that the deaf handshake's touch (400ms) is the session's last.
	x.set(refuse)
	refused := y.count(refuse) // a's first dial may have tried Y
	cut := time.Now()
	x.drop()
	electortest.Eventually(t, 10*time.Second, "a's client refused by Y", func() bool { return y.count(refuse) > refused })
	y.set(mode)
	deafAt := time.Now()
	rb := electortest.MustLead(t, cb, 30*time.Second, "b")
	gone := seenWithin(deleted, time.Second)
	rel := relTo(cut)
	heard, at := y.answers(rel)
	y.mu.Lock()
	acc := y.accepted
	y.mu.Unlock()
	t.Logf("Y in mode %d (2 deaf, 3 slow) from %s", mode, rel(deafAt))
	t.Logf("fault at 0: member 3 answered a's reconnection with timeouts %v at %v (read by Y; Y accepted %v refuse/forward/deaf/slow); a's node deleted %s; b granted %s",
		heard, at, acc, rel(gone), rel(rb.At))
	held.before(t, ra, rb, cut, 6*time.Second)
}
