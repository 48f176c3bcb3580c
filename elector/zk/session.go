package zk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/clock"
)

// errSessionClosed: the session was closed by electd (the elector's Close,
// or a reset after a request was abandoned).
var errSessionClosed = errors.New("zookeeper session closed")

// sniffer reads the answer to a connection's handshake (the first frame
// the server sends): go-zookeeper keeps the negotiated session timeout to
// itself, and every deadline electd keeps must run on it.
type sniffer struct {
	net.Conn
	found func(timeout time.Duration, session int64)
	head  []byte    // the answer's first bytes so far
	done  bool      // the answer was read
	by    time.Time // the answer must come by then (zero: no bound)
}

// SetReadDeadline passes t on, but no later than by while the handshake's
// answer has not been read: go-zookeeper waits for it ten times its
// receive timeout (6⅔ session timeouts), and a server that accepts the
// connection but does not answer (one that has not joined its quorum yet)
// would hold the client that long, where the next server may serve. The
// client calls it from the goroutine that reads.
func (s *sniffer) SetReadDeadline(t time.Time) error {
	if !s.done && !s.by.IsZero() && (t.IsZero() || t.After(s.by)) {
		t = s.by
	}
	return s.Conn.SetReadDeadline(t)
}

// handshakeHead is the length prefix, protocol version, timeout (ms) and
// session id of a ConnectResponse.
const handshakeHead = 4 + 4 + 4 + 8

// Read passes the stream through, noting the handshake's answer. The
// client reads a connection from one goroutine at a time.
func (s *sniffer) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	if !s.done && n > 0 {
		s.head = append(s.head, b[:min(n, handshakeHead-len(s.head))]...)
		if len(s.head) == handshakeHead {
			s.done = true
			ms := int32(binary.BigEndian.Uint32(s.head[8:12]))
			id := int64(binary.BigEndian.Uint64(s.head[12:20]))
			s.found(time.Duration(ms)*time.Millisecond, id)
			s.head = nil
		}
	}
	return n, err
}

// gen is one ZooKeeper session as the client holds it: its id, the
// timeout the ensemble negotiated, and a channel closed when it ends
// (expired, or closed by electd). The client opens a new session by
// itself after an expiry: a new gen.
type gen struct {
	id      int64
	timeout time.Duration
	lost    <-chan struct{}
}

// session is one elector's ZooKeeper client and the sessions it holds in
// turn. Requests go through do, whose goroutines it owns (close waits for
// them; closing the client answers every pending one).
type session struct {
	zk   *zk.Conn
	clk  clock.Clock // the elector's: the send and answer times of requests
	wg   sync.WaitGroup
	quit chan struct{}

	mu          sync.Mutex
	cur         gen
	lost        chan struct{} // cur's
	granted     chan struct{} // closed while a session is held
	seenTimeout time.Duration // the least of seenID's handshake answers
	seenID      int64
	wire        *link // the connection the client uses now
	closed      bool
}

// open starts a client of c's hosts asking for a session of timeout; it
// connects in the background (ready waits for the session).
func (c *Conn) open(timeout time.Duration) (*session, error) { return c.openOn(timeout, nil) }

// openOn is open with the send and answer times of requests taken on clk
// (nil: the real clock).
func (c *Conn) openOn(timeout time.Duration, clk clock.Clock) (*session, error) {
	s := &session{clk: clock.OrReal(clk), quit: make(chan struct{}), granted: make(chan struct{})}
	conn, _, err := zk.Connect(c.hosts, timeout,
		zk.WithDialer(s.recording(c.dialer(s.sniffed, timeout), c.grants)),
		zk.WithHostProvider(&servers{}),
		zk.WithEventCallback(s.event),
		zk.WithLogger(zkLogger{c.logger}),
		zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("connect to %v: %w", c.hosts, err)
	}
	s.zk = conn
	if c.user != "" {
		// Sent once connected, and again by the client on every
		// reconnection. Not timed: a server answers an auth packet
		// itself, without touching the session.
		if _, err := launch(s, false, func(z *zk.Conn) (struct{}, error) {
			return struct{}{}, z.AddAuth("digest", []byte(c.user+":"+c.pass))
		}).wait(context.Background()); err != nil {
			s.close()
			return nil, fmt.Errorf("digest authentication as %q: %w", c.user, err)
		}
	}
	return s, nil
}

// grants is what host answers a handshake asking for a session of ask
// (probeHost), within wait.
func (c *Conn) grants(host string, ask, wait time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return c.probeHost(ctx, host, ask)
}

// sniffed notes a handshake's answer. A session keeps the least timeout
// any of its handshakes answered (a reconnection to a member with another
// configuration may answer a smaller one, which the ensemble applies from
// then on): when it shrinks under the current gen's, that gen ends (its
// deadlines ran on the larger one) and the reconnection starts a new one.
func (s *session) sniffed(timeout time.Duration, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if timeout <= 0 || id == 0 {
		return
	}
	if id != s.seenID || timeout < s.seenTimeout {
		s.seenTimeout, s.seenID = timeout, id
	}
	if id == s.cur.id && timeout < s.cur.timeout {
		s.endLocked()
	}
}

// event follows the client's session state.
func (s *session) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.State {
	case zk.StateHasSession:
		if s.closed || s.seenID == s.cur.id {
			return // the same session, reconnected
		}
		s.endLocked()
		s.lost = make(chan struct{})
		s.cur = gen{id: s.seenID, timeout: s.seenTimeout, lost: s.lost}
		close(s.granted)
	case zk.StateExpired:
		s.endLocked()
	}
}

// endLocked ends the current session; s.mu held.
func (s *session) endLocked() {
	if s.cur.id == 0 {
		return
	}
	close(s.lost)
	s.cur = gen{}
	s.granted = make(chan struct{})
}

// ready waits until the client holds a session and returns it.
func (s *session) ready(ctx context.Context) (gen, error) {
	for {
		s.mu.Lock()
		g, granted := s.cur, s.granted
		s.mu.Unlock()
		if g.id != 0 {
			return g, nil
		}
		select {
		case <-granted:
		case <-s.quit:
			return gen{}, errSessionClosed
		case <-ctx.Done():
			return gen{}, ctx.Err()
		}
	}
}

// close closes the client (the server deletes the session's ephemeral
// nodes at once if it hears the close, else when the session expires),
// and waits for the requests in flight, which the client answers.
func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.quit)
	s.endLocked()
	s.mu.Unlock()
	s.zk.Close()
	s.wg.Wait()
}

// do runs one request of s's client and returns its answer, or ctx's error
// when ctx ends first: the request then finishes in the background, owned
// by s (close waits for it).
func do[T any](ctx context.Context, s *session, f func(z *zk.Conn) (T, error)) (T, error) {
	return start(s, f).wait(ctx)
}

// pending is a request of s's client under way (start).
type pending[T any] chan answer[T]

type answer[T any] struct {
	v   T
	err error
}

// start sends one request of s's client in the background, owned by s
// (close waits for it); wait reads its answer. A request answered on the
// connection it started on is recorded there (evidence.go): its send time,
// taken before the call, and its answer's, taken as soon as it returns.
func start[T any](s *session, f func(z *zk.Conn) (T, error)) pending[T] {
	return launch(s, true, f)
}

// launch is start, recording the exchange only if timed. Once close has
// begun, a request is answered errSessionClosed without being sent: close
// waits for the requests launched before it.
func launch[T any](s *session, timed bool, f func(z *zk.Conn) (T, error)) pending[T] {
	ch := make(pending[T], 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ch <- answer[T]{err: errSessionClosed}
		return ch
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		wire, sent := s.current(), s.clk.Now()
		v, err := f(s.zk)
		if at := s.clk.Now(); timed && err == nil && wire != nil && s.current() == wire {
			wire.answered(sent, at)
		}
		ch <- answer[T]{v, err}
	}()
	return ch
}

// wait returns the request's answer, or ctx's error when ctx ends first.
func (p pending[T]) wait(ctx context.Context) (T, error) {
	select {
	case r := <-p:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// zkLogger sends the client's messages to electd's log, at debug level:
// they are about connections, which the elector reports itself.
type zkLogger struct {
	l interface{ Debug(string, ...any) }
}

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zookeeper client: " + fmt.Sprintf(format, args...))
}
