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
)

// The deadline rule (doc.go, "Sessions and the deadline"): the ensemble's
// LEADER decides when a session expires, from the touches it hears. A
// follower F touches the session for each packet it receives, and passes
// those touches on to the leader only in its answers to the leader's pings
// (every tickTime/2), on the same stream as the requests it forwards. When
// the client reads the answer to a request of its own, F has had that
// request (and touched the session) by then; a Sync (or a write) sent on
// the same TCP connection at least lag after that answer reaches F at
// least lag later, whatever the latency, and F forwards it after the ping
// answer that relays the touch. So a Sync that completes shows that the
// session cannot expire before the SEND time of that earlier request plus
// the negotiated timeout. Send times alone cannot show when a packet
// reached F (a stalled link delivers a packet and a later Sync together).
// This file keeps the evidence: the send and answer times of the
// session's own requests, per connection (start records them).

// keepExchanges is how long a connection's exchanges are kept: longer
// than any session timeout (20 ticks), which is as long as one can serve.
const keepExchanges = 5 * time.Minute

// maxExchanges bounds the exchanges a connection keeps (the oldest go).
const maxExchanges = 4096

// exchange is one request of our own on a link: when it was sent (taken
// before the call) and when its answer was read (taken right after the
// call returned), by the elector's clock.
type exchange struct {
	sent, answered time.Time
}

// link is one TCP (or TLS) connection of a session's client and the
// requests of ours answered on it, in the order of their answers. A new
// dial is a new link: evidence never crosses a reconnection.
type link struct {
	mu        sync.Mutex
	exchanges []exchange // answered ascending
}

// answered records a request sent at sent whose answer was read at at.
func (l *link) answered(sent, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.exchanges); n > 0 && at.Before(l.exchanges[n-1].answered) {
		at = l.exchanges[n-1].answered // a clock stepped back: keep the answers ascending (later is safe)
	}
	old := 0
	for old < len(l.exchanges) && (at.Sub(l.exchanges[old].answered) > keepExchanges || len(l.exchanges)-old >= maxExchanges) {
		old++
	}
	l.exchanges = append(l.exchanges[old:], exchange{sent: sent, answered: at})
}

// firstAnswer is the answer time of the earliest answered request on l
// sent after t: the earliest time lag after which a Sync vouches for a
// send time newer than t.
func (l *link) firstAnswer(t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.exchanges {
		if x.sent.After(t) {
			return x.answered, true
		}
	}
	return time.Time{}, false
}

// roundTrip is the time the latest answered request on l took (0 if none).
func (l *link) roundTrip() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.exchanges); n > 0 {
		return l.exchanges[n-1].answered.Sub(l.exchanges[n-1].sent)
	}
	return 0
}

// before is the latest send time of a request on l answered at or before
// cut.
func (l *link) before(cut time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best time.Time
	ok := false
	for _, x := range l.exchanges {
		if x.answered.After(cut) {
			break
		}
		if !ok || x.sent.After(best) {
			best, ok = x.sent, true
		}
	}
	return best, ok
}

// recording wraps dial so that every connection it opens is a new link,
// which becomes the session's current one. A reconnection of a session
// that holds (a gen) first asks the server, on a throwaway connection,
// what timeout it grants (grants): a member with a lower maxSessionTimeout
// applies its smaller timeout to the session as soon as it has the
// handshake (its leader moves the session's expiry EARLIER), before the
// client can read the answer; so the gen, whose deadlines ran on the
// larger one, ends before the handshake is sent. A server that does not
// answer the probe is not dialled: the client tries the next.
func (s *session) recording(dial zk.Dialer, grants func(host string, ask, wait time.Duration) (time.Duration, error)) zk.Dialer {
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		s.mu.Lock()
		held := s.cur.timeout // 0: no session held
		s.mu.Unlock()
		if held > 0 {
			got, err := grants(addr, held, timeout)
			if err != nil {
				return nil, fmt.Errorf("ask %s which session timeout it grants before reconnecting: %w", addr, err)
			}
			if got < held {
				s.mu.Lock()
				if s.cur.timeout == held {
					s.endLocked()
				}
				s.mu.Unlock()
			}
		}
		nc, err := dial(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.wire = &link{}
		s.mu.Unlock()
		return nc, nil
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
// requests it was to vouch for.
var errLinkChanged = errors.New("the connection to the ensemble changed during the renewal")

// lagOf is how long before a Sync (or write) is sent the answer to an
// earlier request on the same connection must have been read for the
// Sync's success to prove that the request's touch reached the ensemble's
// leader: half a tick (the leader pings each
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
		d, err := c.probeHost(ctx, h, time.Millisecond)
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

// probeHost asks host, on a connection of its own, for a session of ask
// and returns the timeout it grants (its minSessionTimeout for 1ms); the
// throwaway session is closed at once.
func (c *Conn) probeHost(ctx context.Context, host string, ask time.Duration) (time.Duration, error) {
	var got time.Duration
	wait := time.Second
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	nc, err := c.dialer(func(t time.Duration, _ int64) { got = t }, 0)("tcp", host, wait)
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
	binary.BigEndian.PutUint32(req[16:], uint32(max(ask.Milliseconds(), 1)))
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
