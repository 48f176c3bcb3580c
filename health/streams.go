package health

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// streamSet holds the open /leader/watch streams: at most max in all and
// perClient per client address. When every slot is taken, a new stream
// takes the slot of the oldest one if that has lived for grace (the write
// timeout, given to join): clients that hold streams and never read cannot keep a new
// watcher out for longer than that. A preempted stream ends; SSE clients
// reconnect.
type streamSet struct {
	mu        sync.Mutex
	max       int
	perClient int
	open      []*stream // oldest first
}

// stream is one open /leader/watch; preempted is closed when a newer
// stream took its slot.
type stream struct {
	client    string
	started   time.Time
	preempted chan struct{}
}

var (
	errStreamsFull      = errors.New("too many watch streams")
	errClientStreamFull = errors.New("too many watch streams from this address")
)

func newStreamSet(max, perClient int) *streamSet {
	return &streamSet{max: max, perClient: perClient}
}

// join opens a stream for the client at remoteAddr, or says why not; when
// every slot is taken, it preempts the oldest stream if that has lived for
// grace.
func (ss *streamSet) join(remoteAddr string, now time.Time, grace time.Duration) (*stream, error) {
	client := clientOf(remoteAddr)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := 0
	for _, st := range ss.open {
		if st.client == client {
			n++
		}
	}
	if n >= ss.perClient {
		return nil, errClientStreamFull
	}
	if len(ss.open) >= ss.max {
		oldest := ss.open[0]
		if now.Sub(oldest.started) < grace {
			return nil, errStreamsFull
		}
		close(oldest.preempted)
		ss.open = ss.open[1:]
	}
	st := &stream{client: client, started: now, preempted: make(chan struct{})}
	ss.open = append(ss.open, st)
	return st, nil
}

// leave closes st's slot, unless a newer stream took it already.
func (ss *streamSet) leave(st *stream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for i, o := range ss.open {
		if o == st {
			ss.open = append(ss.open[:i], ss.open[i+1:]...)
			return
		}
	}
}

// clientOf is the client address of a request's RemoteAddr, without its
// port.
func clientOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().String()
	}
	return host
}
