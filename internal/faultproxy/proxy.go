// Package faultproxy is a userspace TCP proxy for fault injection in tests.
//
// A Proxy listens on 127.0.0.1 and forwards every accepted connection to one
// target address. While it runs, a test can:
//
//   - Cut it: a black hole, like a network partition. Connections stay open,
//     but no byte is delivered in either direction; peers see silence. Bytes
//     already read are held in order, and once the proxy's small per-direction
//     buffer is full the proxy stops reading, so TCP flow control pushes back
//     on the sender. Connections accepted while cut are held silent too: the
//     proxy does not even dial the target until Heal.
//   - Heal it: forwarding resumes and every held byte IS DELIVERED, in order,
//     as after a healed partition where TCP retransmits (nothing is dropped,
//     no connection is closed by Heal). A peer that closed or reset its side
//     during the cut has that close or reset passed on after its held bytes.
//     Call Reset right after Heal to model "connections died during the
//     partition" instead.
//   - SetDelay: add one-way latency to every chunk in both directions,
//     preserving order. A chunk is delivered no earlier than the moment it was
//     read plus the delay in force when it is sent.
//   - Reset: abort every current connection with an RST (SO_LINGER 0) on both
//     sides, and keep listening.
//
// Close stops listening, aborts every connection and waits until every
// goroutine the proxy started has returned.
package faultproxy

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts what a Proxy has done since New.
type Stats struct {
	Conns     int64 // client connections accepted
	BytesUp   int64 // bytes delivered client → target
	BytesDown int64 // bytes delivered target → client
}

// Proxy forwards TCP connections from Addr to a target, with faults on demand.
// Its methods are safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	cut     bool
	delay   time.Duration
	changed chan struct{} // closed and replaced whenever cut or delay changes
	closed  bool
	links   map[*link]struct{}

	conns, up, down atomic.Int64
}

// New listens on 127.0.0.1:0 and forwards every connection to target
// (host:port). The target is dialled once per accepted connection.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		target:  target,
		ln:      ln,
		changed: make(chan struct{}),
		links:   make(map[*link]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients dial, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut stops forwarding in both directions without closing any connection.
func (p *Proxy) Cut() { p.update(func() { p.cut = true }) }

// Heal resumes forwarding; bytes held during the cut are delivered in order.
func (p *Proxy) Heal() { p.update(func() { p.cut = false }) }

// SetDelay sets the one-way latency added to every chunk in both directions.
// Zero or negative means none.
func (p *Proxy) SetDelay(d time.Duration) {
	p.update(func() { p.delay = max(d, 0) })
}

// Reset aborts every current connection (RST to both peers) and keeps
// listening for new ones.
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.abort()
	}
}

// Close stops listening, aborts every connection and waits for every
// goroutine of the proxy to return. It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	p.mu.Unlock()
	var err error
	if !already {
		if cerr := p.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = fmt.Errorf("faultproxy: close listener: %w", cerr)
		}
	}
	p.Reset()
	p.wg.Wait()
	return err
}

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	return Stats{Conns: p.conns.Load(), BytesUp: p.up.Load(), BytesDown: p.down.Load()}
}

// update applies f under the lock and wakes everyone waiting on a change.
func (p *Proxy) update(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
}

// state returns the current fault settings and a channel closed on the next change.
func (p *Proxy) state() (cut bool, delay time.Duration, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut, p.delay, p.changed
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // listener closed
		}
		l := newLink(c)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.abort()
			return
		}
		p.links[l] = struct{}{}
		// Counted once Reset can see it: a caller that waits for the count
		// and then resets must reach this connection.
		p.conns.Add(1)
		p.wg.Add(1) // while acceptLoop still holds its own count
		p.mu.Unlock()
		go p.serve(l)
	}
}

func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}
