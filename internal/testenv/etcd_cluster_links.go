package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// An etcd member advertises ONE peer URL, which every other member dials:
// the URL cannot differ by dialer (member ids are hashed from it). So each
// member's advertised peer URL is a front, a listener of testenv's own,
// which finds out which member dialed it (the process owning the other end
// of the socket, read from /proc) and forwards the connection through the
// fault proxy of that directed link, dialer → member. Raft traffic flows on
// connections both ends dial (a member reads its peers' messages on streams
// it dialed, and sends on streams they dialed), so cutting the four links
// of member i cuts it off in both directions.

// identifyTimeout bounds the wait for a front to tell which member dialed
// it: a member's pid is known from its first probe, just after it started.
const identifyTimeout = 2 * time.Second

// peerFront accepts the peer connections to one member.
type peerFront struct {
	ln    net.Listener
	route func(c net.Conn) (string, error) // address to forward c to
	wg    sync.WaitGroup

	done      chan struct{} // closed by Close
	strangers atomic.Int64  // connections refused: no member's

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

func newPeerFront(route func(net.Conn) (string, error)) (*peerFront, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("peer front: listen: %w", err)
	}
	f := &peerFront{ln: ln, route: route, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.acceptLoop()
	return f, nil
}

// Addr is the address the member advertises to its peers.
func (f *peerFront) Addr() string { return f.ln.Addr().String() }

func (f *peerFront) acceptLoop() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		if !f.track(c) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go f.serve(c)
	}
}

// track remembers c for Close; false once the front is closed.
func (f *peerFront) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *peerFront) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

func (f *peerFront) serve(c net.Conn) {
	defer f.wg.Done()
	defer f.untrack(c)
	// A member's pid is recorded at its first probe, just after it
	// started: a connection it made before is told on a later try.
	deadline := time.Now().Add(identifyTimeout)
	var addr string
	var err error
	for {
		if addr, err = f.route(c); err == nil {
			break
		}
		if time.Now().After(deadline) {
			// Not a member's: refused rather than let past a partition,
			// unless its dialer closed it meanwhile (a socket nobody
			// holds has no owner to tell).
			if !closedByPeer(c) {
				f.strangers.Add(1)
			}
			return
		}
		select {
		case <-f.done:
			return
		case <-time.After(pollInterval):
		}
	}
	up, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return
	}
	if !f.track(up) {
		_ = up.Close()
		return
	}
	defer f.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// Close stops listening, closes every connection and waits for the front's
// goroutines.
func (f *peerFront) Close() {
	f.mu.Lock()
	if !f.closed {
		close(f.done)
	}
	f.closed = true
	conns := make([]net.Conn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	_ = f.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	f.wg.Wait()
}

// socketOwner returns which of pids holds the socket at the other end of
// c (a loopback connection accepted by this process), or -1.
func socketOwner(c net.Conn, pids []int) (int, error) {
	local, lok := c.LocalAddr().(*net.TCPAddr)
	remote, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return -1, fmt.Errorf("not a TCP connection: %v", c.RemoteAddr())
	}
	// The dialer's socket: its local port is our remote one, and back.
	inode, err := tcpInode(remote.Port, local.Port)
	if err != nil {
		return -1, err
	}
	for i, pid := range pids {
		if pid != 0 && holdsSocket(pid, inode) {
			return i, nil
		}
	}
	return -1, nil
}

// tcpInode returns the inode of the loopback TCP socket whose local port is
// lport and remote port rport (rport 0: a listening socket on lport).
func tcpInode(lport, rport int) (string, error) {
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || !hasPort(fs[1], lport) || !hasPort(fs[2], rport) {
				continue
			}
			if rport == 0 && fs[3] != "0A" { // TCP_LISTEN
				continue
			}
			_ = fh.Close()
			return fs[9], nil
		}
		_ = fh.Close()
	}
	return "", fmt.Errorf("no socket %d→%d in /proc/net/tcp", lport, rport)
}

// hasPort reports whether a /proc/net/tcp address ("0100007F:1F90") has
// port p.
func hasPort(addr string, p int) bool {
	_, hex, ok := strings.Cut(addr, ":")
	if !ok {
		return false
	}
	got, err := strconv.ParseUint(hex, 16, 16)
	return err == nil && int(got) == p
}

// holdsSocket reports whether process pid has socket inode open.
func holdsSocket(pid int, inode string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}

// closedByPeer reports whether the other end of c has closed it (a member
// killed with its request in flight, say): reading what it sent reaches
// the end of the stream at once.
func closedByPeer(c net.Conn) bool {
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		return false
	}
	_, err := io.Copy(io.Discard, c)
	return err == nil // io.Copy reads to EOF
}
