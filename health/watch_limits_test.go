package health

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// idleWatcher opens /leader/watch at addr from the loopback address from
// (127.0.0.x), reads the status line and then never reads again. It
// returns the status code.
func idleWatcher(t *testing.T, addr, from string) int {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A small receive buffer, as a client that stopped reading would
	// soon have a full one.
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	if _, err := fmt.Fprintf(c, "GET /leader/watch HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("watch from %s: %v", from, err)
	}
	var code int
	if _, err := fmt.Sscanf(line, "HTTP/1.1 %d", &code); err != nil {
		t.Fatalf("watch from %s: status line %q", from, line)
	}
	return code
}

// watchFrom makes one /leader/watch request from the loopback address
// from and returns its status; a 200 stream is closed at once.
func watchFrom(t *testing.T, base, from string) int {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/leader/watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestIdleWatchersDoNotKeepOutNewOnes: MaxStreams clients (from several
// addresses) that open /leader/watch and never read hold every slot; a new
// watcher from another address gets one within the write timeout.
func TestIdleWatchersDoNotKeepOutNewOnes(t *testing.T) {
	s, o := newTestServer(t, nil)
	s.writeTimeout = time.Second
	s.heartbeat = 10 * time.Millisecond
	base, _ := serve(t, s)
	o.feed(t, leader("a", 1))
	addr := strings.TrimPrefix(base, "http://")
	for i := range MaxStreams {
		from := fmt.Sprintf("127.0.0.%d", 1+i/MaxStreamsPerClient)
		if code := idleWatcher(t, addr, from); code != http.StatusOK {
			t.Fatalf("idle watcher %d from %s: %d, want 200", i, from, code)
		}
	}
	full := time.Now()
	const newcomer = "127.0.1.1"
	deadline := full.Add(5 * s.writeTimeout)
	for {
		code := watchFrom(t, base, newcomer)
		if code == http.StatusOK {
			break
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("new watcher: %d, want 200 or 503", code)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle watchers kept a new watcher out for %v (write timeout %v)", MaxStreams, time.Since(full), s.writeTimeout)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	took := time.Since(full)
	t.Logf("new watcher admitted %v after the slots filled (write timeout %v)", took.Round(time.Millisecond), s.writeTimeout)
	if took > s.writeTimeout+time.Second { // a second of slack for a loaded machine
		t.Fatalf("new watcher kept out for %v, longer than the write timeout %v", took, s.writeTimeout)
	}
}

// TestWatchStreamsPerClient: one address may hold MaxStreamsPerClient
// streams; beyond that it gets 503 while another address still gets in.
func TestWatchStreamsPerClient(t *testing.T) {
	s, o := newTestServer(t, nil)
	base, _ := serve(t, s)
	o.feed(t, leader("a", 1))
	addr := strings.TrimPrefix(base, "http://")
	for i := range MaxStreamsPerClient {
		if code := idleWatcher(t, addr, "127.0.0.1"); code != http.StatusOK {
			t.Fatalf("watcher %d: %d, want 200", i, code)
		}
	}
	if code := watchFrom(t, base, "127.0.0.1"); code != http.StatusServiceUnavailable {
		t.Fatalf("watcher %d from the same address: %d, want 503", MaxStreamsPerClient+1, code)
	}
	if code := watchFrom(t, base, "127.0.0.2"); code != http.StatusOK {
		t.Fatalf("watcher from another address: %d, want 200", code)
	}
}
