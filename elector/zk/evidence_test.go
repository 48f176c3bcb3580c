package zk

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
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

// TestEvidence: the request a Sync vouches for is the latest SENT among
// our own requests on the Sync's connection whose answer was read at least
// lag before the Sync was sent, by the elector's clock (start records the
// send and answer times); a request answered late counts only from its
// answer, a failed one never, and none across a reconnection.
func TestEvidence(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clock.NewFake(t0)
	s := &session{clk: fc}
	dials := 0
	dial := s.recording(pipeDialer(t, &dials), func(string, time.Duration, time.Duration) (time.Duration, error) {
		t.Error("a first connection asked what the server grants")
		return 0, nil
	})
	const lag = 170 * time.Millisecond
	// ask sends a request that is answered rtt later (or fails), and
	// waits for its answer.
	ask := func(rtt time.Duration, fail error) {
		t.Helper()
		_, err := start(s, func(*zk.Conn) (struct{}, error) {
			fc.Advance(rtt)
			return struct{}{}, fail
		}).wait(context.Background())
		if !errors.Is(err, fail) {
			t.Fatalf("request: %v, want %v", err, fail)
		}
	}

	if _, err := dial("tcp", "a:2181", time.Second); err != nil {
		t.Fatal(err)
	}
	wire := s.current()
	if _, ok := evidence(s, wire, fc.Now(), lag); ok {
		t.Fatal("evidence on a connection with no answered request")
	}
	ask(30*time.Millisecond, nil) // A: sent t0, answered t0+30ms
	fc.Advance(70 * time.Millisecond)
	ask(150*time.Millisecond, nil) // B: sent t0+100ms, answered t0+250ms (a stalled link)
	fc.Advance(10 * time.Millisecond)
	ask(10*time.Millisecond, nil)                          // C: sent t0+260ms, answered t0+270ms
	ask(5*time.Millisecond, errors.New("connection lost")) // sent t0+270ms, failed: no evidence
	// sent t0+275ms, answered t0+276ms, untimed (an auth packet): no evidence
	if _, err := launch(s, false, func(*zk.Conn) (struct{}, error) {
		fc.Advance(time.Millisecond)
		return struct{}{}, nil
	}).wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	// E: sent t0+240ms (before C), answered t0+280ms.
	wire.answered(t0.Add(240*time.Millisecond), t0.Add(280*time.Millisecond))
	for _, c := range []struct {
		sync time.Time
		want time.Time
		ok   bool
	}{
		{t0.Add(190 * time.Millisecond), time.Time{}, false}, // no answer 170ms before
		{t0.Add(200 * time.Millisecond), t0, true},           // exactly lag after A's answer: counts
		{t0.Add(419 * time.Millisecond), t0, true},           // B was sent long before, but answered too late
		{t0.Add(420 * time.Millisecond), t0.Add(100 * time.Millisecond), true},
		{t0.Add(440 * time.Millisecond), t0.Add(260 * time.Millisecond), true},
		{t0.Add(450 * time.Millisecond), t0.Add(260 * time.Millisecond), true}, // E answered, sent before C
		{t0.Add(time.Hour), t0.Add(260 * time.Millisecond), true},              // the failed and untimed requests are no evidence
	} {
		got, ok := evidence(s, wire, c.sync, lag)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("sync at t0+%s: evidence %v %t, want t0+%v %t", c.sync.Sub(t0), got.Sub(t0), ok, c.want.Sub(t0), c.ok)
		}
	}
	// The first answer to a request sent after a deadline's evidence: what
	// the next renewal waits lag after.
	for _, c := range []struct {
		after, want time.Time
		ok          bool
	}{
		{t0.Add(-time.Nanosecond), t0.Add(30 * time.Millisecond), true},
		{t0, t0.Add(250 * time.Millisecond), true},
		{t0.Add(100 * time.Millisecond), t0.Add(270 * time.Millisecond), true},
		{t0.Add(250 * time.Millisecond), t0.Add(270 * time.Millisecond), true},
		{t0.Add(260 * time.Millisecond), time.Time{}, false},
	} {
		if got, ok := wire.firstAnswer(c.after); ok != c.ok || !got.Equal(c.want) {
			t.Errorf("first answer after t0+%s: t0+%v %t, want t0+%s %t", c.after.Sub(t0), got.Sub(t0), ok, c.want.Sub(t0), c.ok)
		}
	}

	// A request under way across a reconnection counts on neither
	// connection.
	_, err := start(s, func(*zk.Conn) (struct{}, error) {
		if _, err := dial("tcp", "b:2181", time.Second); err != nil {
			return struct{}{}, err
		}
		fc.Advance(10 * time.Millisecond)
		return struct{}{}, nil
	}).wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if dials != 2 || s.current() == wire {
		t.Fatalf("%d dials; a new dial must be a new link", dials)
	}
	if got, ok := wire.before(fc.Now()); !ok || !got.Equal(t0.Add(260*time.Millisecond)) {
		t.Errorf("the request across the reconnection was recorded on the old connection: %v", got.Sub(t0))
	}
	if _, ok := evidence(s, wire, fc.Now().Add(time.Second), lag); ok {
		t.Error("evidence from the connection before a reconnection")
	}
	fresh := s.current()
	if _, ok := evidence(s, fresh, fc.Now().Add(time.Second), lag); ok {
		t.Error("evidence on a new connection before any answered request (one answered across the reconnection counted)")
	}
	sent := fc.Now()
	ask(20*time.Millisecond, nil)
	at := fc.Now()
	if got, ok := evidence(s, fresh, at.Add(lag), lag); !ok || !got.Equal(sent) {
		t.Errorf("evidence on the new connection %v %t, want its request's send time", got, ok)
	}
	if _, ok := evidence(s, fresh, at.Add(lag-time.Millisecond), lag); ok {
		t.Error("a request answered less than lag before the Sync counted")
	}
}

// TestLinkKeeps: exchanges answered longer than keepExchanges ago go, and
// at most maxExchanges are kept; a clock stepping back does not reorder
// the answers.
func TestLinkKeeps(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &link{}
	l.answered(t0, t0)
	l.answered(t0.Add(keepExchanges+time.Second), t0.Add(keepExchanges+time.Second))
	if _, ok := l.before(t0.Add(time.Second)); ok {
		t.Error("an exchange older than keepExchanges was kept")
	}
	for i := range maxExchanges + 10 {
		at := t0.Add(keepExchanges + 2*time.Second + time.Duration(i)*time.Millisecond)
		l.answered(at, at)
	}
	if len(l.exchanges) != maxExchanges {
		t.Errorf("%d exchanges kept, want %d", len(l.exchanges), maxExchanges)
	}
	last := l.exchanges[len(l.exchanges)-1]
	l.answered(last.answered.Add(-2*time.Hour), last.answered.Add(-time.Hour))
	if got := l.exchanges[len(l.exchanges)-1].answered; !got.Equal(last.answered) {
		t.Errorf("an answer stamped earlier than the last one was recorded at %v, want %v", got, last.answered)
	}
}

// TestLag: the tick is half the least timeout a server grants (probed) or
// half the negotiated one, whichever is less; lag is half a tick plus a
// quarter tick plus 20ms; and the room a term's first deadline must leave
// (firstRoom).
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
	// The room a term's first deadline must leave: what a renewal leaves
	// (the window less an interval), and never less than a missed
	// renewal needs (two intervals and lag).
	for _, c := range []struct {
		timing elector.Timing
		want   time.Duration
	}{
		{elector.Timing{TTL: 2 * time.Second, RenewInterval: 400 * time.Millisecond}, 1570 * time.Millisecond}, // window 1.97s
		{elector.Timing{TTL: 2 * time.Second, RenewInterval: 900 * time.Millisecond}, 1970 * time.Millisecond}, // 2·900ms+170ms
	} {
		if got := firstRoom(c.timing.WithDefaults(), 170*time.Millisecond); got != c.want {
			t.Errorf("firstRoom(%s) = %s, want %s", c.timing.WithDefaults(), got, c.want)
		}
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

// TestReconnectGrants: a reconnection of a session that holds first asks
// the server which timeout it grants. A server that grants less than the
// session's ends the session's gen before the handshake goes out (its
// leader would apply the smaller timeout on receiving it); one that grants
// as much keeps it; one that does not answer is not dialled.
func TestReconnectGrants(t *testing.T) {
	const held = 4 * time.Second
	tests := []struct {
		name    string
		grants  time.Duration
		err     error
		ended   bool // the gen ended
		dialled bool
	}{
		{name: "grants as much", grants: held, dialled: true},
		{name: "grants more", grants: 2 * held, dialled: true},
		{name: "grants less", grants: 400 * time.Millisecond, ended: true, dialled: true},
		{name: "does not answer", err: errors.New("i/o timeout")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lost := make(chan struct{})
			s := &session{clk: clock.Real{}, granted: make(chan struct{}), lost: lost}
			s.cur = gen{id: 7, timeout: held, lost: lost}
			dials := 0
			var asked time.Duration
			dial := s.recording(pipeDialer(t, &dials), func(host string, ask, _ time.Duration) (time.Duration, error) {
				asked = ask
				select {
				case <-lost:
					t.Error("the gen ended before the server was asked")
				default:
				}
				return tc.grants, tc.err
			})
			_, err := dial("tcp", "b:2181", time.Second)
			if asked != held {
				t.Errorf("asked the server for %s, want the session's %s", asked, held)
			}
			if (err == nil) != tc.dialled || (dials == 1) != tc.dialled {
				t.Errorf("dial: %v after %d dials, want dialled %t", err, dials, tc.dialled)
			}
			select {
			case <-lost:
				if !tc.ended {
					t.Error("the gen ended")
				}
			default:
				if tc.ended {
					t.Error("the gen holds after a reconnection to a server that grants less")
				}
			}
		})
	}
}
