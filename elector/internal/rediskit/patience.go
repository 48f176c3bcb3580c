package rediskit

import (
	"sync"
	"time"

	"github.com/electd/electd/elector"
)

// Patience is how long a loop's next request to one Redis server may wait
// for its reply.
//
// A request that times out costs its connection: its reply may still come,
// so the client closes it. The retry must then dial and greet the server
// (HELLO) before it sends the script: two round trips, three after a
// restart (EVALSHA answered NOSCRIPT, then EVAL). So a fixed timeout
// between one and two round trips never succeeds again once a connection
// is lost, however long the store stays that slow: a metastable outage
// (measured on loopback through a proxy adding 130 ms each way, a 261 ms
// round trip against a 400 ms timeout: 5 of 5 requests on the open
// connection answered, then 0 of 20 after it was reset or the server
// restarted). Patience breaks the loop: each timeout doubles the next
// request's timeout, up to its limit, and each reply halves it, down to its base. A
// store that answers slowly is thus waited for; a dead connection still
// costs one base timeout before the retry on a new one.
//
// Waiting longer is safe: a renewal counts from its send time whenever its
// reply comes (elector.Deadline), and no term outlives its deadline.
//
// A Patience is safe for concurrent use.
type Patience struct {
	base, limit time.Duration

	mu  sync.Mutex
	cur time.Duration
}

// NewPatience starts at base and grows to limit (at least base).
func NewPatience(base, limit time.Duration) *Patience {
	return &Patience{base: base, limit: max(base, limit), cur: base}
}

// PatienceFor is the Patience of a loop whose single requests, on an open
// connection, are bounded by call: up to four times call, but no more than
// half the TTL, so that several requests still fit in one lease.
func PatienceFor(call time.Duration, t elector.Timing) *Patience {
	return NewPatience(call, min(4*call, t.TTL/2))
}

// Timeout is the timeout of the next request.
func (p *Patience) Timeout() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Observe records a request's outcome: a timeout doubles the next
// timeout, a reply (err nil, or an error the server sent) halves it, and a
// failure of another kind (a refused connection: fast) leaves it.
func (p *Patience) Observe(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.cur = max(p.base, p.cur/2)
		return
	}
	switch ErrorClass(err) {
	case elector.ClassTimeout:
		p.cur = min(2*p.cur, p.limit)
	case ClassConn, ClassClosed, elector.ClassCanceled, elector.ClassOther:
		// no reply, but not for want of waiting
	default: // the server answered with an error
		p.cur = max(p.base, p.cur/2)
	}
}
