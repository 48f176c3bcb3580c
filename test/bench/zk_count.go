package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// zkCounter is a TCP proxy in front of a ZooKeeper server that reads the
// client protocol's frames (a 4-byte length, then the body) as they pass
// and counts them: from the client, the session handshakes ("connect")
// and every request by its op code (the body's second int32; the first
// is the xid); from the server, the watch notifications (xid −1). Only
// what goes through it is counted, so the benchmark's own reads (direct
// to the server) are not.
type zkCounter struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	counts map[string]float64
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection's copiers
}

// Keys of a zkCounter's counts besides the op names.
const (
	zkHandshake = "connect"      // a session handshake (new session or reconnection)
	zkPing      = "ping"         // the client library's keep-alive
	zkNotify    = "watch events" // notifications the server sent
)

// zkOps names ZooKeeper's op codes (ZooDefs.OpCode).
var zkOps = map[int32]string{
	1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData", 6: "getACL", 7: "setACL",
	8: "getChildren", 9: "sync", 11: zkPing, 12: "getChildren2", 13: "check", 14: "multi",
	15: "create2", 16: "reconfig", 17: "checkWatches", 18: "removeWatches", 19: "createContainer",
	21: "createTTL", 22: "multiRead", 100: "auth", 101: "setWatches", 102: "sasl",
	103: "getEphemerals", 104: "getAllChildrenNumber", 105: "setWatches2", 106: "addWatch",
	107: "whoAmI", -11: "closeSession",
}

// zkMaxFrame is jute's default maximum packet (jute.maxbuffer, 1 MiB)
// with room for the header: a longer "length" is not a frame (a
// four-letter word), and the connection is passed on uncounted.
const zkMaxFrame = 1<<20 + 1024

func newZKCounter(target string) (*zkCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("zk counter: listen: %w", err)
	}
	z := &zkCounter{ln: ln, target: target, counts: map[string]float64{}, conns: map[net.Conn]struct{}{}}
	z.wg.Add(1)
	go z.acceptLoop()
	return z, nil
}

// Addr is the address clients dial.
func (z *zkCounter) Addr() string { return z.ln.Addr().String() }

// snap returns a copy of the counts so far.
func (z *zkCounter) snap() map[string]float64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	m := make(map[string]float64, len(z.counts))
	for k, v := range z.counts {
		m[k] = v
	}
	return m
}

func (z *zkCounter) add(key string) {
	z.mu.Lock()
	z.counts[key]++
	z.mu.Unlock()
}

// track registers c to be closed by close; false once closed.
func (z *zkCounter) track(c net.Conn) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.closed {
		return false
	}
	z.conns[c] = struct{}{}
	return true
}

func (z *zkCounter) forget(c net.Conn) {
	z.mu.Lock()
	delete(z.conns, c)
	z.mu.Unlock()
}

// close stops listening, closes every connection and waits for every
// goroutine it started.
func (z *zkCounter) close() error {
	z.mu.Lock()
	z.closed = true
	for c := range z.conns {
		_ = c.Close()
	}
	z.mu.Unlock()
	err := z.ln.Close()
	z.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("zk counter: close: %w", err)
	}
	return nil
}

func (z *zkCounter) acceptLoop() {
	defer z.wg.Done()
	for {
		c, err := z.ln.Accept()
		if err != nil {
			return // closed
		}
		if !z.track(c) {
			_ = c.Close()
			return
		}
		z.wg.Add(1)
		go z.serve(c)
	}
}

// serve dials the server for client c and copies both ways, counting.
func (z *zkCounter) serve(c net.Conn) {
	defer z.wg.Done()
	defer z.forget(c)
	defer c.Close()
	s, err := net.Dial("tcp", z.target)
	if err != nil {
		return // the client sees its connection closed, as with a server down
	}
	if !z.track(s) {
		_ = s.Close()
		return
	}
	defer z.forget(s)
	defer s.Close()
	done := make(chan struct{})
	z.wg.Add(1)
	go func() {
		defer z.wg.Done()
		defer close(done)
		z.copyFrames(s, c, true)
		_ = s.Close() // the client went: so does the server's side
	}()
	z.copyFrames(c, s, false)
	_ = c.Close()
	<-done
}

// copyFrames copies frames from src to dst and counts them: up (client
// → server) the handshake and then requests by op; down (server →
// client) the handshake's answer and then the notifications.
func (z *zkCounter) copyFrames(dst, src net.Conn, up bool) {
	var hdr [4]byte
	buf := make([]byte, 0, 4096)
	first := true
	for {
		if _, err := io.ReadFull(src, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[:]))
		if n < 0 || n > zkMaxFrame {
			// Not the client protocol: pass the rest on as it is.
			if _, err := dst.Write(hdr[:]); err == nil {
				_, _ = io.Copy(dst, src)
			}
			return
		}
		if cap(buf) < 4+n {
			buf = make([]byte, 0, 4+n)
		}
		buf = append(buf[:0], hdr[:]...)
		buf = buf[:4+n]
		if _, err := io.ReadFull(src, buf[4:]); err != nil {
			return
		}
		switch {
		case first && up:
			z.add(zkHandshake)
		case first:
		case up && n >= 8:
			op := int32(binary.BigEndian.Uint32(buf[8:12]))
			name, ok := zkOps[op]
			if !ok {
				name = fmt.Sprintf("op %d", op)
			}
			z.add(name)
		case !up && n >= 4 && int32(binary.BigEndian.Uint32(buf[4:8])) == -1:
			z.add(zkNotify)
		}
		first = false
		if _, err := dst.Write(buf); err != nil {
			return
		}
	}
}
