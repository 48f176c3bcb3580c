package zk

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestHandshakeAnswerWithin: a server that accepts the connection but
// does not answer the handshake (one not yet in its quorum) holds the
// client no longer than the bound, whatever read deadline the client sets
// (go-zookeeper sets 6⅔ session timeouts); once the answer is read, the
// client's deadlines pass as they are.
func TestHandshakeAnswerWithin(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	// The first connection gets no answer; the second the handshake's.
	head := make([]byte, handshakeHead)
	head[3] = handshakeHead - 4
	head[11] = 0x0f // 15ms
	head[19] = 7    // session 7
	go func() {
		for i := 0; ; i++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func(answer bool) {
				defer func() { _ = nc.Close() }()
				if answer {
					if _, err := nc.Write(head); err != nil {
						return
					}
				}
				_, _ = nc.Read(make([]byte, 1)) // hold until the client closes
			}(i == 1)
		}
	}()
	c := &Conn{}
	var found time.Duration
	const within = 200 * time.Millisecond

	// Silent: the read ends at the bound, not at the client's deadline.
	nc, err := c.dialer(func(d time.Duration, _ int64) { found = d }, within)("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := nc.SetReadDeadline(start.Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = nc.Read(make([]byte, 4))
	if took := time.Since(start); !errors.Is(err, os.ErrDeadlineExceeded) || took > 5*time.Second {
		t.Fatalf("read from a silent server: %v after %s, want a deadline at about %s", err, took, within)
	}
	_ = nc.Close()

	// Answered: the timeout is noted and a later deadline is the client's.
	nc, err = c.dialer(func(d time.Duration, _ int64) { found = d }, within)("tcp", ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	if err := nc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := readFull(nc, handshakeHead); err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	if found != 15*time.Millisecond {
		t.Errorf("handshake answer's timeout %s, want 15ms", found)
	}
	start = time.Now()
	if err := nc.SetReadDeadline(start.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = nc.Read(make([]byte, 1))
	if took := time.Since(start); !errors.Is(err, os.ErrDeadlineExceeded) || took < 900*time.Millisecond {
		t.Fatalf("read after the answer: %v after %s, want the client's own deadline (1s)", err, took)
	}
}

// readFull reads n bytes from nc.
func readFull(nc net.Conn, n int) ([]byte, error) {
	b := make([]byte, n)
	for got := 0; got < n; {
		k, err := nc.Read(b[got:])
		if err != nil {
			return b[:got], err
		}
		got += k
	}
	return b, nil
}
