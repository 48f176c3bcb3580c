package etcd_test

import (
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// memberLB is a TCP load balancer in front of the cluster's members, as an
// etcd gateway (`etcd gateway start`), a Kubernetes Service, HAProxy or a
// DNS name with one address per member is: each client connection goes to
// one member, chosen when the connection is accepted, and a client that
// reconnects may land on another member. electd given such an address
// (--store etcd://gateway:23790) has one endpoint, so one pin, whose
// connection can reach a different member after each reconnect.
//
// The test decides where each new connection goes (route), and what
// happens to it once the member's answers pass (steps: close it, hold it
// silent, or hold back what the client sends until Release); it can also
// hold connections silent (a black hole, nothing closed) or close them at
// any time. It reads the member → client direction frame by frame (HTTP/2
// frame headers only) to tell when an answer has passed.
type memberLB struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	closed bool
	seq    int       // connections accepted so far
	def    lbRoute   // route of a connection when plan is empty
	plan   []lbRoute // routes of the next connections, in order
	conns  []*lbConn // by accept order
	log    []string  // what happened, for the test's log
	start  time.Time
	events chan string // a route's name, each time one of its steps fires
}

// lbRoute says where one connection goes, and what the balancer does as
// the member's answers pass: steps, in order.
type lbRoute struct {
	name  string // for the log
	to    string // member client address; "" holds the connection silent
	steps []lbStep
}

// lbStep: once a server→client HTTP/2 frame that until matches has been
// relayed, then.
type lbStep struct {
	until func(typ, flags byte, stream uint32, length int) bool
	then  lbAction
}

type lbAction int

const (
	lbClose lbAction = iota // close the connection (FIN to the client after what was relayed)
	lbHold                  // relay nothing more, either way; keep the connection open
	lbPause                 // relay nothing more client → member until Release
)

// lbConn is one client connection and its member connection.
type lbConn struct {
	seq    int
	client *net.TCPConn
	route  lbRoute

	mu     sync.Mutex
	server net.Conn
	held   bool          // relay nothing more
	pause  chan struct{} // non-nil: relay nothing client → member until closed
	closed bool
	done   chan struct{} // closed by close
}

// Frames of HTTP/2 (RFC 9113, section 6).
const (
	h2Data    = 0x0
	h2Headers = 0x1
	flagEnd   = 0x1 // END_STREAM on DATA and HEADERS
)

// firstData matches the first DATA frame of a request stream: a streaming
// RPC's first answer (LeaseKeepAlive's, which carries no end of stream).
func firstData(typ, _ byte, stream uint32, length int) bool {
	return typ == h2Data && stream != 0 && length > 0
}

// endOfStream matches the frame that ends a request stream: a unary RPC's
// trailers (Range's), after its answer.
func endOfStream(typ, flags byte, stream uint32, _ int) bool {
	return (typ == h2Headers || typ == h2Data) && stream != 0 && flags&flagEnd != 0
}

func startMemberLB(t *testing.T, def lbRoute) *memberLB {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("member load balancer: %v", err)
	}
	lb := &memberLB{ln: ln, def: def, start: time.Now(), events: make(chan string, 16)}
	lb.wg.Add(1)
	go lb.acceptLoop()
	t.Cleanup(lb.close)
	return lb
}

func (lb *memberLB) Addr() string { return lb.ln.Addr().String() }

func (lb *memberLB) logf(s string) {
	lb.log = append(lb.log, time.Since(lb.start).Round(time.Millisecond).String()+" "+s)
}

// Log returns what the balancer did, for the test's log.
func (lb *memberLB) Log() []string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return append([]string(nil), lb.log...)
}

// Conns is the number of connections accepted so far.
func (lb *memberLB) Conns() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.seq
}

// Plan sets the routes of the next connections, in order; once they are
// used, def.
func (lb *memberLB) Plan(def lbRoute, next ...lbRoute) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.def, lb.plan = def, next
}

// Hold holds every connection accepted from the first-th on silent.
func (lb *memberLB) Hold(first int) { lb.each(first, (*lbConn).hold, "held") }

// Drop closes every connection accepted from the first-th on.
func (lb *memberLB) Drop(first int) { lb.each(first, (*lbConn).close, "closed") }

// each does do to every connection accepted from the first-th on, and logs
// it as done.
func (lb *memberLB) each(first int, do func(*lbConn), done string) {
	for _, c := range lb.from(first) {
		do(c)
	}
	lb.mu.Lock()
	lb.logf(done + " connections from #" + itoa(first))
	lb.mu.Unlock()
}

func (lb *memberLB) from(first int) []*lbConn {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if first >= len(lb.conns) {
		return nil
	}
	return append([]*lbConn(nil), lb.conns[first:]...)
}

func (lb *memberLB) close() {
	lb.mu.Lock()
	lb.closed = true
	conns := append([]*lbConn(nil), lb.conns...)
	lb.mu.Unlock()
	_ = lb.ln.Close()
	for _, c := range conns {
		c.close()
	}
	lb.wg.Wait()
}

func (lb *memberLB) acceptLoop() {
	defer lb.wg.Done()
	for {
		nc, err := lb.ln.Accept()
		if err != nil {
			return
		}
		lb.mu.Lock()
		if lb.closed {
			lb.mu.Unlock()
			_ = nc.Close()
			return
		}
		r := lb.def
		if len(lb.plan) > 0 {
			r, lb.plan = lb.plan[0], lb.plan[1:]
		}
		c := &lbConn{seq: lb.seq, client: nc.(*net.TCPConn), route: r, done: make(chan struct{})}
		lb.seq++
		lb.conns = append(lb.conns, c)
		lb.logf("connection #" + itoa(c.seq) + " → " + r.name)
		lb.mu.Unlock()
		lb.wg.Add(1)
		go func() {
			defer lb.wg.Done()
			lb.serve(c)
		}()
	}
}

func (lb *memberLB) serve(c *lbConn) {
	if c.route.to == "" {
		c.hold()
		_, _ = io.Copy(io.Discard, c.client) // until the client or close ends it
		c.close()
		return
	}
	sc, err := net.DialTimeout("tcp", c.route.to, 5*time.Second)
	if err != nil {
		c.close()
		return
	}
	c.mu.Lock()
	c.server = sc
	closed := c.closed
	c.mu.Unlock()
	if closed {
		_ = sc.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		lb.up(c, sc)
	}()
	lb.down(c, sc)
	<-done
	c.close()
}

// up relays client → member until either side ends, dropping what the
// client sends while the connection is held or closing.
func (lb *memberLB) up(c *lbConn, sc net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			c.waitPause()
		}
		if n > 0 && c.relaying() {
			if _, werr := sc.Write(buf[:n]); werr != nil {
				c.close()
				return
			}
		}
		if err != nil {
			c.close()
			return
		}
	}
}

// down relays member → client frame by frame, and acts on the route's
// trigger once the frame it matches has been relayed.
func (lb *memberLB) down(c *lbConn, sc net.Conn) {
	var hdr [9]byte
	for {
		if _, err := io.ReadFull(sc, hdr[:]); err != nil {
			_ = c.client.CloseWrite()
			return
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		stream := binary.BigEndian.Uint32(hdr[5:9]) &^ (1 << 31)
		body := make([]byte, length)
		if _, err := io.ReadFull(sc, body); err != nil {
			_ = c.client.CloseWrite()
			return
		}
		if !c.relaying() {
			continue
		}
		if _, err := c.client.Write(append(hdr[:], body...)); err != nil {
			c.close()
			return
		}
		if len(c.route.steps) > 0 && c.route.steps[0].until(typ, flags, stream, length) {
			step := c.route.steps[0]
			c.route.steps = c.route.steps[1:]
			lb.mu.Lock()
			lb.logf("connection #" + itoa(c.seq) + " (" + c.route.name + "): answer relayed")
			lb.mu.Unlock()
			select {
			case lb.events <- c.route.name:
			default:
			}
			switch step.then {
			case lbHold:
				c.hold()
			case lbPause:
				c.mu.Lock()
				c.pause = make(chan struct{})
				c.mu.Unlock()
			case lbClose:
				// The client reads the answer, then the end of the
				// connection: gRPC fails what else is under way on it and
				// connects again (through the balancer) for the next call.
				c.hold() // drop what the client still sends here
				_ = c.client.CloseWrite()
				_ = sc.Close()
			}
		}
	}
}

// waitPause blocks while the connection is paused.
func (c *lbConn) waitPause() {
	c.mu.Lock()
	ch := c.pause
	c.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-c.done:
	}
}

// Release resumes every paused connection.
func (lb *memberLB) Release() {
	for _, c := range lb.from(0) {
		c.mu.Lock()
		if c.pause != nil {
			close(c.pause)
			c.pause = nil
		}
		c.mu.Unlock()
	}
	lb.mu.Lock()
	lb.logf("released paused connections")
	lb.mu.Unlock()
}

// Event waits up to within for a route's step to fire and returns the
// route's name.
func (lb *memberLB) Event(within time.Duration) (string, bool) {
	select {
	case name := <-lb.events:
		return name, true
	case <-time.After(within):
		return "", false
	}
}

func (c *lbConn) relaying() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.held && !c.closed
}

func (c *lbConn) hold() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

func (c *lbConn) close() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	sc := c.server
	c.mu.Unlock()
	if already {
		return
	}
	close(c.done)
	_ = c.client.Close()
	if sc != nil {
		_ = sc.Close()
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
