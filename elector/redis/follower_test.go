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

	"github.com/electd/electd/elector"
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
	leader := newElectorWith(t, Config{Client: newClient(t, srv.Addr()), Election: "idle-minute", ID: "leader", Timing: tm})
	fcli := redis.NewClient(&redis.Options{Addr: srv.Addr(), ClientName: "follower", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = fcli.Close() })
	follower := newElectorWith(t, Config{Client: fcli, Election: "idle-minute", ID: "follower", Timing: tm})
	ra := mustLead(t, campaign(ctx, leader), 5*ttl, "leader")
	cb := campaign(ctx, follower)
	waitQueued(t, cli, "idle-minute", 2)

	mon, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	if _, err := fmt.Fprint(mon, "MONITOR\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(mon)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	start := time.Now()
	if err := mon.SetReadDeadline(start.Add(window)); err != nil {
		t.Fatal(err)
	}
	byAddr := map[string]map[string]int{} // client address → command → count
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // the window's deadline
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
		cmd := strings.Trim(strings.Fields(line[end+1:] + " x")[0], `"`)
		if byAddr[f[1]] == nil {
			byAddr[f[1]] = map[string]int{}
		}
		byAddr[f[1]][strings.ToLower(cmd)]++
	}
	stillWaiting(t, cb, "follower")

	// The follower's connections, by the name its client gives them.
	list, err := cli.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	sent, detail := 0, map[string]int{}
	for _, l := range strings.Split(list, "\n") {
		if !strings.Contains(l, " name=follower ") {
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
	resign(t, ra.term)
}
