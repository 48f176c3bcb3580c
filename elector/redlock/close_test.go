package redlock

// Close: what it stops, and how long it takes with every server cut off.

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// TestCloseStopsEverything: after Close, no goroutine the Elector
// started is left, in a term, while observing, and in a campaign cut off
// from every server.
func TestCloseStopsEverything(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	election := "close"
	before := runtime.NumGoroutine()

	func() {
		a := newElector(t, h.addrs(), election, "a", ttl)
		ctx := context.Background()
		obs := a.Observe(ctx)
		term, err := a.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = a.Close()
		select {
		case <-term.Done():
		case <-time.After(time.Second):
			t.Fatal("term not ended by Close")
		}
		for range obs {
		}
	}()

	ps, addrs := h.proxies(t)
	for _, p := range ps {
		p.Cut()
	}
	c := newElector(t, addrs, election, "c", ttl)
	ch := electortest.Campaign(context.Background(), c)
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	_ = c.Close()
	t.Logf("Close took %s with every server cut off (see TestCloseCutOff)", time.Since(t0).Round(time.Millisecond))
	if r := <-ch; !errors.Is(r.Err, elector.ErrClosed) {
		t.Errorf("campaign after Close: %v", r.Err)
	}
	for _, p := range ps {
		p.Heal()
	}
	var left []string
	for range 50 {
		left = redlockGoroutines()
		if len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("%d goroutines of the package left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	_ = before
}

// redlockGoroutines are the stacks running this package's code, other
// than tests.
func redlockGoroutines() []string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "elector/redlock.(") || strings.Contains(g, "elector/redlock.fanOut") {
			if !strings.Contains(g, "elector/redlock.Test") && !strings.Contains(g, "testing.tRunner") {
				out = append(out, g)
			}
		}
	}
	return out
}

// TestCloseCutOff: Close takes about 5 s while every server is black
// holed (a partition), whatever the TTL: bus.run is inside
// Client.Subscribe(e.ctx, ...), whose connection handshake (HELLO) reads
// with go-redis's own timeout, since e.ctx has no deadline and a cancelled
// context does not interrupt a read; and bus.close cannot close a PubSub
// that Subscribe has not returned yet.
func TestCloseCutOff(t *testing.T) {
	h := newHarness(t, 3)
	const ttl = time.Second
	ps, addrs := h.proxies(t)
	for _, p := range ps {
		p.Cut()
	}
	c := newElector(t, addrs, "close-cut", "c", ttl)
	ch := electortest.Campaign(context.Background(), c)
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Logf("still closing after 1s:\n%s", strings.Join(redlockGoroutines(), "\n\n"))
		}
	}()
	_ = c.Close()
	close(done)
	<-ch
	if d := time.Since(t0); d > ttl {
		t.Errorf("Close took %s with every server cut off (TTL %s)", d.Round(time.Millisecond), ttl)
	}
	for _, p := range ps {
		p.Heal()
	}
}
