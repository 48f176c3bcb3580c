package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const patience = 5 * time.Second // upper bound for anything that should happen

// echoServer echoes every connection until the peer half-closes, then closes.
type echoServer struct {
	ln       net.Listener
	wg       sync.WaitGroup
	accepted atomic.Int64
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	e := &echoServer{ln: ln, conns: make(map[net.Conn]struct{})}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			e.mu.Lock()
			e.conns[c] = struct{}{}
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

// newEchoProxy is newProxy in front of a new echo server.
func newEchoProxy(t *testing.T) (*echoServer, *Proxy) {
	t.Helper()
	echo := startEcho(t)
	return echo, Start(t, echo.ln.Addr().String())
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, patience)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads the same number of bytes back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	expectRead(t, c, msg)
}

func expectRead(t *testing.T, c net.Conn, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %q: %v", want, err)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// expectSilence asserts that a read on c blocks for d (times out) while c stays open.
func expectSilence(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	n, err := c.Read(b[:])
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read during cut: n=%d err=%v, want a timeout", n, err)
	}
	_ = c.SetReadDeadline(time.Time{})
}

// waitFor polls cond until it holds or patience runs out.
// expectClosed reads from c and fails unless the read reports the
// connection closed within patience (what names the read).
func expectClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(patience))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error // os.ErrDeadlineExceeded is one, with Timeout true
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("%s: %v, want a closed connection", what, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

func TestForward(t *testing.T) {
	_, p := newEchoProxy(t)
	if !strings.HasPrefix(p.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q, want 127.0.0.1:PORT", p.Addr())
	}
	c := dial(t, p.Addr())
	roundTrip(t, c, "hello")
	big := strings.Repeat("x", 1<<20) // several chunks, in order
	go func() { _, _ = c.Write([]byte(big)) }()
	expectRead(t, c, big)
	want := int64(5 + len(big))
	waitFor(t, "byte counters", func() bool {
		s := p.Stats()
		return s.Conns == 1 && s.BytesUp == want && s.BytesDown == want
	})
}

func TestHalfCloseIsPassedOn(t *testing.T) {
	_, p := newEchoProxy(t)
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("bye")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatalf("close write: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(patience))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "bye" {
		t.Fatalf("read all = %q, %v; want \"bye\", EOF", got, err)
	}
}

func TestCutHoldsAndHealDelivers(t *testing.T) {
	echo, p := newEchoProxy(t)
	c := dial(t, p.Addr())
	roundTrip(t, c, "before")

	p.Cut()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatalf("write during cut: %v", err)
	}
	expectSilence(t, c, 200*time.Millisecond)
	// A connection made during the cut is accepted but not passed on.
	c2 := dial(t, p.Addr())
	if _, err := c2.Write([]byte("new")); err != nil {
		t.Fatalf("write on new conn during cut: %v", err)
	}
	expectSilence(t, c2, 100*time.Millisecond)
	if n := echo.accepted.Load(); n != 1 {
		t.Fatalf("target accepted %d connections during the cut, want 1", n)
	}

	p.Heal()
	expectRead(t, c, "held") // held bytes are delivered, in order
	expectRead(t, c2, "new")
	roundTrip(t, c, "after")
	if s := p.Stats(); s.Conns != 2 {
		t.Fatalf("Stats().Conns = %d, want 2", s.Conns)
	}
}

func TestReset(t *testing.T) {
	_, p := newEchoProxy(t)
	c := dial(t, p.Addr())
	roundTrip(t, c, "one")

	p.Reset()
	expectClosed(t, c, "read after reset")
	roundTrip(t, dial(t, p.Addr()), "still listening")
}

func TestResetWhileCut(t *testing.T) {
	_, p := newEchoProxy(t)
	p.Cut()
	c := dial(t, p.Addr())
	waitFor(t, "the held connection", func() bool { return p.Stats().Conns == 1 })
	p.Reset()
	expectClosed(t, c, "read after reset")
}

func TestSetDelay(t *testing.T) {
	_, p := newEchoProxy(t)
	c := dial(t, p.Addr())
	roundTrip(t, c, "warm")

	const d = 50 * time.Millisecond
	p.SetDelay(d)
	start := time.Now()
	roundTrip(t, c, "slow")
	if rtt := time.Since(start); rtt < 2*d {
		t.Fatalf("round trip took %v, want at least %v (delay each way)", rtt, 2*d)
	}
	// Order is preserved across many small chunks under delay.
	var want bytes.Buffer
	for i := range 50 {
		msg := []byte{byte('a' + i%26)}
		want.Write(msg)
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	expectRead(t, c, want.String())

	p.SetDelay(0)
	roundTrip(t, c, "fast")
}

func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := Start(t, addr)
	c, err := net.DialTimeout("tcp", p.Addr(), patience)
	if err != nil {
		return // reset before the dial even completed: fine
	}
	defer c.Close()
	expectClosed(t, c, "read via proxy to a dead target")
}

// proxyGoroutines lists the stacks of goroutines running proxy code.
func proxyGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var found []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "faultproxy.(*Proxy)") {
			found = append(found, g)
		}
	}
	return found
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	echo := startEcho(t)
	before := runtime.NumGoroutine()
	p, err := New(echo.ln.Addr().String())
	if err != nil {
		t.Fatalf("new proxy: %v", err)
	}
	live := dial(t, p.Addr())
	roundTrip(t, live, "live")
	p.SetDelay(time.Hour) // a chunk stuck in a delay
	if _, err := live.Write([]byte("stuck")); err != nil {
		t.Fatalf("write: %v", err)
	}
	p.Cut()
	held := dial(t, p.Addr()) // a connection held by the cut
	waitFor(t, "the held connection", func() bool { return p.Stats().Conns == 2 })

	if err := p.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Close has waited for every goroutine to finish its work; one may still
	// be on its way out (past its deferred Done), so wait briefly, as goleak does.
	deadline := time.Now().Add(patience)
	for gs := proxyGoroutines(); len(gs) > 0; gs = proxyGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("%d proxy goroutines left after Close:\n%s", len(gs), strings.Join(gs, "\n\n"))
		}
		runtime.Gosched()
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	for _, c := range []net.Conn{live, held} {
		expectClosed(t, c, "read after close")
		_ = c.Close()
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), patience); err == nil {
		t.Fatalf("dial after close succeeded, want refused")
	}
	// The echo server's goroutines for closed connections end too; overall the
	// count returns to where it was (polled: their exit is asynchronous).
	waitFor(t, "goroutine count to settle", func() bool { return runtime.NumGoroutine() <= before })
}
