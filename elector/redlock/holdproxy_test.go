package redlock

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// holdProxy stands between one candidate and one redis-server and holds
// back the script steps a rule picks: such a request, and whatever follows
// it on its connection, never reaches the server through the proxy, and
// the candidate's request times out (its round moves on). deliver then
// runs the held requests on the server, as TCP delivers a request written
// to a connection the client has since given up on once a partition
// heals: the server cannot tell it from the original, since a step's
// effect depends only on its arguments. Other connections, and the
// requests no rule picks, pass.
type holdProxy struct {
	target string
	ln     net.Listener
	done   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	holds []*hold
	conns []net.Conn
}

// hold is one rule of a holdProxy and the requests it held, in order.
type hold struct {
	match func(s step) bool
	once  bool          // hold the first match only
	off   bool          // delivered or dropped: holds nothing more
	reqs  [][]string    // the held requests' arguments
	first chan struct{} // closed when the first request is held
}

// step is a stepScript request's arguments (ARGV; see stepScript).
type step struct{ mode, entry, token string }

// anyStep picks every step.
func anyStep(step) bool { return true }

// stepOf decodes a command that runs stepScript; false for any other.
func stepOf(args []string) (step, bool) {
	if len(args) < 3 || !strings.HasPrefix(strings.ToLower(args[0]), "eval") {
		return step{}, false
	}
	nkeys, err := strconv.Atoi(args[2])
	if err != nil || len(args) != 3+nkeys+11 {
		return step{}, false // not a step (the view script has no ARGV)
	}
	argv := args[3+nkeys:]
	return step{mode: argv[0], entry: argv[1], token: argv[8]}, true
}

// startHoldProxy listens on loopback and forwards to target until the test ends.
func startHoldProxy(t testing.TB, target string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{target: target, ln: ln, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// holdProxies starts a holdProxy in front of every server of h and
// returns them with their addresses, in server order.
func (h *harness) holdProxies(t testing.TB) ([]*holdProxy, []string) {
	var ps []*holdProxy
	var addrs []string
	for _, s := range h.srvs {
		p := startHoldProxy(t, s.Addr())
		ps, addrs = append(ps, p), append(addrs, p.ln.Addr().String())
	}
	return ps, addrs
}

// hold holds back every later step that match picks (with once, the
// first only).
func (p *holdProxy) hold(match func(step) bool, once bool) *hold {
	h := &hold{match: match, once: once, first: make(chan struct{})}
	p.mu.Lock()
	p.holds = append(p.holds, h)
	p.mu.Unlock()
	return h
}

// holdAll holds back every step on each of ps: the candidate's link to
// those servers is down for steps (its subscriptions stay up).
func holdAll(ps []*holdProxy) []*hold {
	var hs []*hold
	for _, p := range ps {
		hs = append(hs, p.hold(anyStep, false))
	}
	return hs
}

// waitHeld waits up to within for h to hold its first request.
func waitHeld(t testing.TB, h *hold, within time.Duration, what string) {
	t.Helper()
	select {
	case <-h.first:
	case <-time.After(within):
		t.Fatalf("timed out after %s waiting for %s to be held back", within, what)
	}
}

// drop ends h: what it held never lands, and it holds nothing more.
func (p *holdProxy) drop(h *hold) {
	p.mu.Lock()
	h.off = true
	p.mu.Unlock()
}

// deliver ends h and runs what it held on the server, in order, and
// returns the steps' replies.
func (p *holdProxy) deliver(t testing.TB, h *hold) []stepReply {
	t.Helper()
	p.mu.Lock()
	h.off = true
	reqs := h.reqs
	p.mu.Unlock()
	c := serverClient(t, p.target)
	var out []stepReply
	for _, args := range reqs {
		a := make([]any, len(args))
		for i, s := range args {
			a[i] = s
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := c.Do(ctx, a...).Result()
		cancel()
		if err != nil {
			t.Fatalf("deliver a held request to %s: %v", p.target, err)
		}
		r, err := parseStep(v)
		if err != nil {
			t.Fatalf("deliver a held request to %s: %v", p.target, err)
		}
		out = append(out, r)
	}
	return out
}

// picks reports whether a rule holds this command, and records it there.
func (p *holdProxy) picks(args []string) bool {
	s, ok := stepOf(args)
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.holds {
		if h.off || !h.match(s) {
			continue
		}
		h.reqs = append(h.reqs, args)
		if len(h.reqs) == 1 {
			close(h.first)
		}
		h.off = h.once
		return true
	}
	return false
}

func (p *holdProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track records conns for close; false if the proxy is closing.
func (p *holdProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	p.conns = append(p.conns, conns...)
	return true
}

// serve forwards one connection, command by command upstream, until a
// rule holds a command: then the connection goes silent.
func (p *holdProxy) serve(c net.Conn) {
	defer p.wg.Done()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.track(c, s) {
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(c, s)
		_ = c.Close()
	}()
	r := bufio.NewReader(c)
	for {
		raw, args, err := readCommand(r)
		if err != nil {
			_ = s.Close()
			return
		}
		if p.picks(args) {
			return // silent until the proxy closes
		}
		if _, err := s.Write(raw); err != nil {
			_ = c.Close()
			return
		}
	}
}

func (p *holdProxy) close() {
	p.mu.Lock()
	close(p.done)
	conns := p.conns
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

// readCommand reads one RESP command (an array of bulk strings, as
// go-redis writes them) and returns its bytes and arguments.
func readCommand(r *bufio.Reader) ([]byte, []string, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, nil, err
	}
	raw := line
	if line[0] != '*' {
		return raw, nil, nil // inline: passed on as it is
	}
	n, err := strconv.Atoi(string(bytes.TrimRight(line[1:], "\r\n")))
	if err != nil {
		return nil, nil, fmt.Errorf("bad array header %q: %w", line, err)
	}
	args := make([]string, 0, n)
	for range n {
		hdr, err := r.ReadBytes('\n')
		if err != nil {
			return nil, nil, err
		}
		if hdr[0] != '$' {
			return nil, nil, errors.New("not a bulk string")
		}
		l, err := strconv.Atoi(string(bytes.TrimRight(hdr[1:], "\r\n")))
		if err != nil {
			return nil, nil, fmt.Errorf("bad bulk header %q: %w", hdr, err)
		}
		buf := make([]byte, l+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, nil, err
		}
		raw = append(append(raw, hdr...), buf...)
		args = append(args, string(buf[:l]))
	}
	return raw, args, nil
}
