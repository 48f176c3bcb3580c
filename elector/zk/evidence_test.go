package zk

import (
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/clock"
)

// pipeDialer dials net.Pipe connections, counting the dials; the far ends
// are drained and closed with the test.
func pipeDialer(t *testing.T, dials *int) func(network, addr string, timeout time.Duration) (net.Conn, error) {
	return func(string, string, time.Duration) (net.Conn, error) {
		*dials++
		near, far := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			b := make([]byte, 64)
			for {
				if _, err := far.Read(b); err != nil {
					return
				}
			}
		}()
		t.Cleanup(func() {
			_ = near.Close()
			_ = far.Close()
			<-done
		})
		return near, nil
	}
}

// TestEvidence: the packet a Sync vouches for is the latest written on the
// Sync's connection at least lag before it, by the elector's clock; none
// when none is that old, and none across a reconnection.
func TestEvidence(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clock.NewFake(t0)
	s := &session{}
	dials := 0
	dial := s.recording(fc, pipeDialer(t, &dials))
	const lag = 170 * time.Millisecond
	send := func(c net.Conn) {
		t.Helper()
		if _, err := c.Write([]byte("packet")); err != nil {
			t.Fatal(err)
		}
	}

	c1, err := dial("tcp", "a:2181", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wire := s.current()
	if _, ok := evidence(s, wire, fc.Now(), lag); ok {
		t.Fatal("evidence on a connection with no packet")
	}
	send(c1)                           // t0 (the handshake)
	fc.Advance(100 * time.Millisecond) // t0+100ms
	send(c1)
	fc.Advance(50 * time.Millisecond) // t0+150ms
	send(c1)
	fc.Advance(100 * time.Millisecond) // t0+250ms: a Sync sent now
	for _, c := range []struct {
		sync time.Time
		want time.Time
		ok   bool
	}{
		{t0.Add(100 * time.Millisecond), time.Time{}, false}, // nothing 170ms before
		{t0.Add(170 * time.Millisecond), t0, true},           // exactly lag: counts
		{t0.Add(269 * time.Millisecond), t0, true},
		{t0.Add(270 * time.Millisecond), t0.Add(100 * time.Millisecond), true},
		{t0.Add(320 * time.Millisecond), t0.Add(150 * time.Millisecond), true},
	} {
		got, ok := evidence(s, wire, c.sync, lag)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("sync at t0+%s: evidence %v %t, want %v %t", c.sync.Sub(t0), got.Sub(t0), ok, c.want.Sub(t0), c.ok)
		}
	}
	if last, ok := wire.last(); !ok || !last.Equal(t0.Add(150*time.Millisecond)) {
		t.Errorf("last packet %v %t, want t0+150ms", last.Sub(t0), ok)
	}
	// The first packet newer than a deadline's evidence: what the next
	// renewal waits lag after.
	for _, c := range []struct {
		after, want time.Time
		ok          bool
	}{
		{t0.Add(-time.Nanosecond), t0, true},
		{t0, t0.Add(100 * time.Millisecond), true},
		{t0.Add(120 * time.Millisecond), t0.Add(150 * time.Millisecond), true},
		{t0.Add(150 * time.Millisecond), time.Time{}, false},
	} {
		if got, ok := wire.next(c.after); ok != c.ok || !got.Equal(c.want) {
			t.Errorf("next after t0+%s: %v %t, want t0+%s %t", c.after.Sub(t0), got.Sub(t0), ok, c.want.Sub(t0), c.ok)
		}
	}

	// A reconnection: the old connection's packets vouch for nothing more,
	// and the new one starts empty.
	c2, err := dial("tcp", "b:2181", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if dials != 2 || s.current() == wire {
		t.Fatalf("%d dials; a new dial must be a new link", dials)
	}
	if _, ok := evidence(s, wire, fc.Now().Add(time.Second), lag); ok {
		t.Error("evidence from the connection before a reconnection")
	}
	fresh := s.current()
	if _, ok := evidence(s, fresh, fc.Now().Add(time.Second), lag); ok {
		t.Error("evidence on a new connection before any packet")
	}
	send(c2)
	at := fc.Now()
	if got, ok := evidence(s, fresh, at.Add(lag), lag); !ok || !got.Equal(at) {
		t.Errorf("evidence on the new connection %v %t, want its packet", got, ok)
	}
	if _, ok := evidence(s, fresh, at.Add(lag-time.Millisecond), lag); ok {
		t.Error("a packet less than lag before the Sync counted")
	}
}

// TestLinkKeeps: write times older than keepWrites go, and at most
// maxWrites are kept; a clock stepping back does not reorder them.
func TestLinkKeeps(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &link{}
	l.wrote(t0)
	l.wrote(t0.Add(keepWrites + time.Second))
	if _, ok := l.before(t0.Add(time.Second)); ok {
		t.Error("a write older than keepWrites was kept")
	}
	for i := range maxWrites + 10 {
		l.wrote(t0.Add(keepWrites + 2*time.Second + time.Duration(i)*time.Millisecond))
	}
	if len(l.writes) != maxWrites {
		t.Errorf("%d writes kept, want %d", len(l.writes), maxWrites)
	}
	last, _ := l.last()
	l.wrote(last.Add(-time.Hour))
	if got, _ := l.last(); !got.Equal(last) {
		t.Errorf("a write stamped earlier than the last one moved last to %v", got)
	}
}

// TestLag: the tick is half the least timeout a server grants (probed) or
// half the negotiated one, whichever is less; lag is half a tick plus a
// quarter tick plus 20ms.
func TestLag(t *testing.T) {
	for _, c := range []struct {
		timeout, probed, tick time.Duration
	}{
		{4 * time.Second, 400 * time.Millisecond, 200 * time.Millisecond},
		{4 * time.Second, 0, 2 * time.Second},                         // no probe: T ≥ 2 ticks
		{400 * time.Millisecond, time.Second, 200 * time.Millisecond}, // a server of another configuration
	} {
		if got := tickOf(c.timeout, c.probed); got != c.tick {
			t.Errorf("tickOf(%s, %s) = %s, want %s", c.timeout, c.probed, got, c.tick)
		}
	}
	if got, want := lagOf(200*time.Millisecond), 170*time.Millisecond; got != want {
		t.Errorf("lagOf(200ms) = %s, want %s", got, want)
	}
}

// TestLeastTimeout: a session keeps the least timeout its handshakes
// answered; a reconnection answering less ends the current gen (its
// deadlines ran on more), and the next gen runs on the least.
func TestLeastTimeout(t *testing.T) {
	hasSession := zk.Event{Type: zk.EventSession, State: zk.StateHasSession}
	s := &session{quit: make(chan struct{}), granted: make(chan struct{})}
	s.sniffed(4*time.Second, 7)
	s.event(hasSession)
	g := s.cur
	if g.id != 7 || g.timeout != 4*time.Second {
		t.Fatalf("gen %+v, want session 7 on 4s", g)
	}
	s.sniffed(6*time.Second, 7) // a reconnection answering more: nothing changes
	s.event(hasSession)
	if s.cur != g || s.seenTimeout != 4*time.Second {
		t.Fatalf("after a larger answer: gen %+v, seen %s", s.cur, s.seenTimeout)
	}
	select {
	case <-g.lost:
		t.Fatal("the gen ended on a larger answer")
	default:
	}
	s.sniffed(2*time.Second, 7) // a member configured otherwise
	select {
	case <-g.lost:
	default:
		t.Fatal("the gen outlived a smaller answer")
	}
	s.event(hasSession)
	if s.cur.id != 7 || s.cur.timeout != 2*time.Second {
		t.Errorf("gen after the smaller answer %+v, want session 7 on 2s", s.cur)
	}
	s.sniffed(3*time.Second, 7)
	if s.seenTimeout != 2*time.Second {
		t.Errorf("the least answer forgotten: %s", s.seenTimeout)
	}
	s.sniffed(5*time.Second, 8) // a new session: its own answer
	if s.seenTimeout != 5*time.Second {
		t.Errorf("a new session's answer %s, want 5s", s.seenTimeout)
	}
}
