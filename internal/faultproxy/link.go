package faultproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	chunkSize   = 32 << 10 // bytes per read
	queueLen    = 16       // chunks held per direction before the reader stops
	dialTimeout = 10 * time.Second
)

// link is one proxied connection: the accepted client side and, once dialled,
// the target side.
type link struct {
	client net.Conn
	ctx    context.Context // done when the link is finished
	cancel context.CancelFunc
	once   sync.Once

	mu     sync.Mutex
	server net.Conn
}

// chunk is what one read returned: data, or the error that ended the stream.
type chunk struct {
	data []byte
	err  error
	at   time.Time // when it was read
}

func newLink(c net.Conn) *link {
	ctx, cancel := context.WithCancel(context.Background())
	return &link{client: c, ctx: ctx, cancel: cancel}
}

// abort closes both sides with an RST.
func (l *link) abort() { l.finish(true) }

// finish closes both sides once; with rst, SO_LINGER 0 makes the close an RST.
func (l *link) finish(rst bool) {
	l.once.Do(func() {
		l.cancel()
		l.mu.Lock()
		server := l.server
		l.mu.Unlock()
		for _, c := range []net.Conn{l.client, server} {
			if c == nil {
				continue
			}
			if tc, ok := c.(*net.TCPConn); ok && rst {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
	})
}

// setServer records the dialled target side; it reports false (and closes c)
// if the link was finished meanwhile.
func (l *link) setServer(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		_ = c.Close()
		return false
	}
	l.server = c
	return true
}

// serve waits out a cut, dials the target and runs both directions until the
// link is finished.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer p.forget(l)
	if !p.await(l, time.Time{}) {
		return
	}
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(l.ctx, "tcp", p.target)
	if err != nil {
		l.abort() // the client sees a reset, as if the target refused
		return
	}
	if !l.setServer(server) {
		return
	}
	var pipes sync.WaitGroup
	pipes.Add(2)
	p.wg.Add(2)
	go p.pipe(l, l.client, server, &p.up, &pipes)
	go p.pipe(l, server, l.client, &p.down, &pipes)
	pipes.Wait()
	l.finish(false)
}

// pipe delivers src's bytes to dst in order, honouring cut and delay.
func (p *Proxy) pipe(l *link, src, dst net.Conn, count *atomic.Int64, pipes *sync.WaitGroup) {
	defer p.wg.Done()
	defer pipes.Done()
	queue := make(chan chunk, queueLen)
	p.wg.Add(1)
	go p.read(l, src, queue)
	for {
		var c chunk
		select {
		case c = <-queue:
		case <-l.ctx.Done():
			return
		}
		if !p.await(l, c.at) {
			return
		}
		if c.err != nil {
			if !errors.Is(c.err, io.EOF) {
				l.abort() // pass a reset or error on as a reset
				return
			}
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			return
		}
		n, err := dst.Write(c.data)
		count.Add(int64(n))
		if err != nil {
			l.abort()
			return
		}
	}
}

// read feeds src's bytes into queue until src fails or the link finishes.
func (p *Proxy) read(l *link, src net.Conn, queue chan<- chunk) {
	defer p.wg.Done()
	for {
		buf := make([]byte, chunkSize)
		n, err := src.Read(buf)
		now := time.Now()
		if n > 0 {
			select {
			case queue <- chunk{data: buf[:n], at: now}:
			case <-l.ctx.Done():
				return
			}
		}
		if err != nil {
			select {
			case queue <- chunk{err: err, at: now}:
			case <-l.ctx.Done():
			}
			return
		}
	}
}

// await blocks until the proxy is not cut and at+delay has passed. It reports
// false if the link finished first.
func (p *Proxy) await(l *link, at time.Time) bool {
	for {
		cut, delay, changed := p.state()
		if cut {
			select {
			case <-changed:
				continue
			case <-l.ctx.Done():
				return false
			}
		}
		if at.IsZero() {
			return true
		}
		wait := time.Until(at.Add(delay))
		if wait <= 0 {
			return true
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-changed:
		case <-l.ctx.Done():
			timer.Stop()
			return false
		}
		timer.Stop()
	}
}
