package redis

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// TestIdleFollowerCommandsPerMinute counts, with MONITOR, every command a
// waiting candidate's connections send to Redis over one minute, and
// asserts it stays within its renewal budget: no polling loop.
func TestIdleFollowerCommandsPerMinute(t *testing.T) {
	if testing.Short() {
		t.Skip("measures over a one-minute window")
	}
	const (
		ttl    = 3 * time.Second // renewals every 600 ms: 100 a minute
		window = time.Minute
	)
	srv, cli := startRedis(t)
	ctx := context.Background()
	tm := elector.Timing{TTL: ttl}
	leader := newElectorWith(t, Config{Client: newClient(t, srv.Addr()), Candidate: elector.Candidate{Election: "idle-minute", ID: "leader", Timing: tm}})
	fcli := redis.NewClient(&redis.Options{Addr: srv.Addr(), ClientName: "follower", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = fcli.Close() })
	follower := newElectorWith(t, Config{Client: fcli, Candidate: elector.Candidate{Election: "idle-minute", ID: "follower", Timing: tm}})
	ra := electortest.MustLead(t, electortest.Campaign(ctx, leader), 5*ttl, "leader")
	cb := electortest.Campaign(ctx, follower)
	waitQueued(t, cli, "idle-minute", 2)

	mon := startMonitor(t, srv.Addr())
	byAddr := mon.until(time.Now().Add(window), "")
	electortest.StillWaiting(t, cb, "follower")

	sent, detail := sentBy(t, cli, "follower", byAddr)
	renewals := int(window / tm.WithDefaults().RenewInterval)
	t.Logf("idle follower over %s at ttl %s: %d commands (%v); %d renewal intervals", window, ttl, sent, detail, renewals)
	if sent == 0 {
		t.Fatal("saw no command from the follower: the measurement is broken")
	}
	// One script call per renewal, plus one PING per TTL of silence on the
	// subscription (a black-holed connection reports nothing by itself).
	pings := int(window / ttl)
	if bound := renewals + pings + 1; sent > bound {
		t.Fatalf("idle follower sent %d commands in %s, more than its budget of %d renewals + %d pings: %v", sent, window, renewals, pings, detail)
	}
	if detail["evalsha"]+detail["eval"] > renewals+1 {
		t.Fatalf("%d script calls in %s for %d renewal intervals: a polling loop", detail["evalsha"]+detail["eval"], window, renewals)
	}
	electortest.Resign(t, ra.Term)
}

// TestLeaderChangeCostsWatchersNoRead: every message that reports a change
// carries the leader view, so copies that only watch the leader (as every
// electd run does for /leader) learn a handover without a request of their
// own: the cost of a leader change does not grow with the number of copies.
func TestLeaderChangeCostsWatchersNoRead(t *testing.T) {
	const watchers = 5
	srv, cli := startRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, ra, cb := leaderAndWaiter(ctx, t, srv, cli, "views")
	seen := make([]<-chan elector.Leader, watchers)
	for i := range seen {
		wcli := redis.NewClient(&redis.Options{Addr: srv.Addr(), ClientName: "watcher", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = wcli.Close() })
		// A clock that stands still: the view's read at the holder's
		// deadline (once per TTL, not per change) cannot fall in the window.
		w := newElectorWith(t, Config{Client: wcli, Candidate: elector.Candidate{Election: "views", ID: fmt.Sprintf("w%d", i), Timing: testTiming(),
			Clock: clock.NewFake(time.Now())}})
		seen[i] = w.Observe(ctx)
		waitLeader(t, seen[i], "a")
		electortest.Eventually(t, 5*testTTL, "the watcher's view in sync with its subscription", func() bool {
			return w.view.inSync(w.bus.state())
		})
	}

	mon := startMonitor(t, srv.Addr())
	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, testTTL, "b")
	for _, ch := range seen {
		waitLeader(t, ch, "b")
	}
	byAddr := mon.until(time.Now().Add(10*time.Second), "views-marker")
	sent, detail := sentBy(t, cli, "watcher", byAddr)
	t.Logf("one handover, %d watching copies: %d commands from them (%v)", watchers, sent, detail)
	// A PING on a silent subscription may fall in the window; reads may not.
	if reads := detail["evalsha"] + detail["eval"]; reads != 0 {
		t.Errorf("watching copies sent %d scripts for one leader change, want 0: %v", reads, detail)
	}
	electortest.Resign(t, rb.Term)
}

// waitLeader reads ch until it reports the leader id.
func waitLeader(t testing.TB, ch <-chan elector.Leader, id string) {
	t.Helper()
	deadline := time.After(5 * testTTL)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("Observe closed before reporting %s", id)
			}
			if l.ID == id {
				return
			}
		case <-deadline:
			t.Fatalf("Observe did not report %s", id)
		}
	}
}

// monitor reads a MONITOR connection: every command Redis executes, with the
// address of the client that sent it.
type monitor struct {
	t    testing.TB
	addr string
	conn net.Conn
	r    *bufio.Reader
}

func startMonitor(t testing.TB, addr string) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprint(conn, "MONITOR\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	return &monitor{t: t, addr: addr, conn: conn, r: r}
}

// until counts the commands sent (not those run inside scripts) by client
// address → command, up to deadline or, if marker is not empty, up to an
// ECHO of marker that until sends itself once it starts reading.
func (m *monitor) until(deadline time.Time, marker string) map[string]map[string]int {
	m.t.Helper()
	if err := m.conn.SetReadDeadline(deadline); err != nil {
		m.t.Fatal(err)
	}
	if marker != "" {
		c := redis.NewClient(&redis.Options{Addr: m.addr})
		err := c.Echo(context.Background(), marker).Err()
		_ = c.Close()
		if err != nil {
			m.t.Fatalf("echo marker: %v", err)
		}
	}
	byAddr := map[string]map[string]int{}
	for {
		line, err := m.r.ReadString('\n')
		if err != nil {
			if marker != "" {
				m.t.Fatalf("MONITOR: marker not seen: %v", err)
			}
			return byAddr // the window's deadline
		}
		// 1701234567.123456 [0 127.0.0.1:54321] "evalsha" ...
		open, end := strings.IndexByte(line, '['), strings.IndexByte(line, ']')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(line[open+1 : end])
		if len(f) != 2 || f[1] == "lua" { // commands run inside scripts are not sent
			continue
		}
		args := strings.Fields(line[end+1:] + " x")
		cmd := strings.ToLower(strings.Trim(args[0], `"`))
		if marker != "" && cmd == "echo" && strings.Trim(args[1], `"`) == marker {
			return byAddr
		}
		if byAddr[f[1]] == nil {
			byAddr[f[1]] = map[string]int{}
		}
		byAddr[f[1]][cmd]++
	}
}

// sentBy sums byAddr over the connections of clients named name.
func sentBy(t testing.TB, cli *redis.Client, name string, byAddr map[string]map[string]int) (int, map[string]int) {
	t.Helper()
	list, err := cli.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	sent, detail := 0, map[string]int{}
	for _, l := range strings.Split(list, "\n") {
		if !strings.Contains(l, " name="+name+" ") {
			continue
		}
		for _, kv := range strings.Fields(l) {
			if addr, ok := strings.CutPrefix(kv, "addr="); ok {
				for cmd, n := range byAddr[addr] {
					sent += n
					detail[cmd] += n
				}
			}
		}
	}
	return sent, detail
}

// TestViewReadsOnlyWhenAMessageLacksTheView: a message from an electd that
// predates views in messages (a rolling upgrade) makes a watching copy read
// the state once; a "grant" message, whose script published the view in a
// message of its own, makes it read nothing.
func TestViewReadsOnlyWhenAMessageLacksTheView(t *testing.T) {
	srv, cli := startRedis(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wcli := redis.NewClient(&redis.Options{Addr: srv.Addr(), ClientName: "watcher", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = wcli.Close() })
	// A still clock: the view's own timers never fire.
	w := newElectorWith(t, Config{Client: wcli, Candidate: elector.Candidate{Election: "old-msgs", ID: "w", Timing: testTiming(),
		Clock: clock.NewFake(time.Now())}})
	seen := w.Observe(ctx)
	waitFor := func(what string, ok func(elector.Leader) bool) {
		t.Helper()
		deadline := time.After(5 * testTTL)
		for {
			select {
			case l := <-seen:
				if ok(l) {
					return
				}
			case <-deadline:
				t.Fatalf("Observe did not report %s", what)
			}
		}
	}
	waitFor("no leader", elector.Leader.IsZero)
	electortest.Eventually(t, 5*testTTL, "the watcher's view in sync with its subscription", func() bool {
		return w.view.inSync(w.bus.state())
	})
	publish := func(payload string) {
		t.Helper()
		if err := cli.Publish(ctx, w.keys.channel, payload).Err(); err != nil {
			t.Fatal(err)
		}
	}
	reads := func(mon *monitor, marker string) int {
		t.Helper()
		_, detail := sentBy(t, cli, "watcher", mon.until(time.Now().Add(10*time.Second), marker))
		return detail["evalsha"] + detail["eval"]
	}

	// A grant message, then a message carrying a view (from far in the
	// future, so it is newer than anything read): once Observe reports
	// that view, the bus and the view are done with the grant message.
	mon := startMonitor(t, srv.Addr())
	publish("grant e1")
	publish("join e2\n9000000000000000\nsync\n\n7\n1\n60000")
	waitFor("the leader of the synthetic view", func(l elector.Leader) bool { return l.ID == "sync" })
	if n := reads(mon, "after-grant"); n != 0 {
		t.Errorf("a grant message made the view read %d times, want 0", n)
	}

	// A change reported without the view: only a read can bring the view
	// back to the store's state (no leader).
	mon = startMonitor(t, srv.Addr())
	publish("leave e2")
	waitFor("no leader after the read", elector.Leader.IsZero)
	if n := reads(mon, "after-old-message"); n != 1 {
		t.Errorf("a message without the view made the view read %d times, want 1", n)
	}
}
