package zk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/clock"
)

// The deadline rule (doc.go, "Sessions and the deadline"): the ensemble's
// LEADER decides when a session expires, from the touches it hears. A
// follower touches the session for each packet it receives, and passes
// those touches on to the leader only in its answers to the leader's pings
// (every tickTime/2), on the same stream as the requests it forwards. A
// Sync (or a write) that completes went through the leader after every
// ping answer the follower wrote before it: so every packet written on the
// same TCP connection at least lag before the Sync was sent has touched
// the session at the leader, and the session cannot expire before that
// packet's send time plus the negotiated timeout. This file keeps the
// evidence: the send time of every packet, per connection.

// keepWrites is how long a connection's write times are kept: longer than
// any session timeout (20 ticks), which is as long as one can serve.
const keepWrites = 5 * time.Minute

// maxWrites bounds the write times a connection keeps (the oldest go).
const maxWrites = 4096

// link is one TCP (or TLS) connection of a session's client and the send
// times of the packets written on it, by the elector's clock. A new dial
// is a new link: evidence never crosses a reconnection.
type link struct {
	mu     sync.Mutex
	writes []time.Time // ascending
}

// wrote records a packet written at t (taken before the write: the server
// reads it later, so the touch it makes is no earlier).
func (l *link) wrote(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.writes); n > 0 && t.Before(l.writes[n-1]) {
		t = l.writes[n-1] // a clock stepped back: keep the times ascending
	}
	old := 0
	for old < len(l.writes) && (t.Sub(l.writes[old]) > keepWrites || len(l.writes)-old >= maxWrites) {
		old++
	}
	l.writes = append(l.writes[old:], t)
}

// last is the send time of the latest packet written on l.
func (l *link) last() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.writes) == 0 {
		return time.Time{}, false
	}
	return l.writes[len(l.writes)-1], true
}

// next is the send time of the earliest packet written on l after t.
func (l *link) next(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.writes {
		if w.After(t) {
			return w, true
		}
	}
	return time.Time{}, false
}

// before is the send time of the latest packet written on l at or before
// cut.
func (l *link) before(cut time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.writes) - 1; i >= 0; i-- {
		if !l.writes[i].After(cut) {
			return l.writes[i], true
		}
	}
	return time.Time{}, false
}

// recorder is a connection that records the send time of every write on
// its link. go-zookeeper writes each packet in one Write, from one
// goroutine at a time (the handshake, then its send loop: requests and its
// own pings).
type recorder struct {
	net.Conn
	clk  clock.Clock
	link *link
}

func (r *recorder) Write(b []byte) (int, error) {
	r.link.wrote(r.clk.Now())
	return r.Conn.Write(b)
}

// recording wraps dial so that every connection it opens records its
// writes on a new link, which becomes the session's current one.
func (s *session) recording(clk clock.Clock, dial zk.Dialer) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		nc, err := dial(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		l := &link{}
		s.mu.Lock()
		s.wire = l
		s.mu.Unlock()
		return &recorder{Conn: nc, clk: clk, link: l}, nil
	}
}

// current is the client's connection now (nil before the first dial).
func (s *session) current() *link {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wire
}

// errLinkChanged: the client reconnected while a proof was in flight, so
// the request that went through the leader may not have followed the
// packets it was to vouch for.
var errLinkChanged = errors.New("the connection to the ensemble changed during the renewal")

// lagOf is how long before a Sync (or write) a packet must have been
// written on the same connection for the Sync's success to prove that its
// touch reached the ensemble's leader: half a tick (the leader pings each
// follower every tickTime/2) plus a margin of a quarter tick and 20ms for
// the leader's ping period jitter and one-way latency.
func lagOf(tick time.Duration) time.Duration {
	return tick/2 + tick/4 + 20*time.Millisecond
}

// tickOf bounds the ensemble's tick from above: half the session timeout
// negotiated (a server clamps timeouts up to minSessionTimeout, 2·tickTime
// by default, and never sets it lower), and half the minimum a server
// answered to the probe (probed, 0 if unknown).
func tickOf(timeout, probed time.Duration) time.Duration {
	if probed > 0 && probed < timeout {
		return probed / 2
	}
	return timeout / 2
}

// probeMinTimeout asks a server of c (each in turn, a second at most
// each) for a session of 1ms over a connection of its own; the server
// answers with its minSessionTimeout, the least it grants. The throwaway
// session is closed at once.
func (c *Conn) probeMinTimeout(ctx context.Context) (time.Duration, error) {
	var errs []error
	for _, h := range c.hosts {
		d, err := c.probeHost(ctx, h)
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return 0, fmt.Errorf("probe the servers' least session timeout: %w", errors.Join(errs...))
}

func (c *Conn) probeHost(ctx context.Context, host string) (time.Duration, error) {
	var got time.Duration
	wait := time.Second
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	nc, err := c.dialer(func(t time.Duration, _ int64) { got = t })("tcp", host, wait)
	if err != nil {
		return 0, fmt.Errorf("dial %s: %w", host, err)
	}
	defer func() { _ = nc.Close() }() // a probe: nothing to report
	if err := nc.SetDeadline(time.Now().Add(wait)); err != nil {
		return 0, fmt.Errorf("set a deadline on %s: %w", host, err)
	}
	// ConnectRequest: length, protocol version 0, last zxid 0, timeout
	// (ms), session 0, a password of 16 zero bytes.
	req := make([]byte, 4+4+8+4+8+4+16)
	binary.BigEndian.PutUint32(req[0:], uint32(len(req)-4))
	binary.BigEndian.PutUint32(req[16:], 1)
	binary.BigEndian.PutUint32(req[28:], 16)
	if _, err := nc.Write(req); err != nil {
		return 0, fmt.Errorf("send a handshake to %s: %w", host, err)
	}
	if _, err := io.ReadFull(nc, make([]byte, handshakeHead)); err != nil {
		return 0, fmt.Errorf("read the handshake answer of %s: %w", host, err)
	}
	if got <= 0 {
		return 0, fmt.Errorf("%s granted no session", host)
	}
	// closeSession: length, xid 1, opcode -11.
	closeReq := make([]byte, 4+4+4)
	binary.BigEndian.PutUint32(closeReq[0:], 8)
	binary.BigEndian.PutUint32(closeReq[4:], 1)
	binary.BigEndian.PutUint32(closeReq[8:], uint32(0xfffffff5))
	if _, err := nc.Write(closeReq); err != nil {
		// The answer stands; the session lapses by itself after got.
		c.logger.Debug("zookeeper probe: close the throwaway session", "server", host, "err", err)
	}
	return got, nil
}
