package redis

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// newClientDB is newClient on database db.
func newClientDB(t testing.TB, addr string, db int) *redis.Client {
	t.Helper()
	cli := redis.NewClient(&redis.Options{Addr: addr, DB: db, ContextTimeoutEnabled: true, DialTimeout: time.Second})
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// headLog records the head of every message a bus receives, in order.
type headLog struct {
	mu    sync.Mutex
	heads []string
}

func (l *headLog) match(head, _ string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.heads = append(l.heads, head)
	return false
}

// has reports whether a head of candidate id arrived.
func (l *headLog) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.heads {
		if strings.HasPrefix(h, id+"#") {
			return true
		}
	}
	return false
}

// TestSameElectionInTwoDatabases: the keys of an election live in the
// client's database, but pub/sub channels are server-wide. An election of
// the same name in database 1 must not reach a watcher of database 0: its
// leader would be reported as database 0's until the next read.
func TestSameElectionInTwoDatabases(t *testing.T) {
	srv, cli := startRedis(t)
	const election = "twodbs"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := func(db int, id string) *Elector {
		return newElectorWith(t, Config{Client: newClientDB(t, srv.Addr(), db), Candidate: elector.Candidate{
			Election: election, ID: id, Address: "http://" + id + ".test", Timing: testTiming()}})
	}
	a0, b0, w0 := in(0, "zero-a"), in(0, "zero-b"), in(0, "watcher")
	heads := &headLog{}
	w0.bus.Add(heads.match)
	seen := observeIDs(ctx, w0)

	ra := electortest.MustLead(t, electortest.Campaign(ctx, a0), 5*testTTL, "zero-a")
	cb := electortest.Campaign(ctx, b0)
	waitQueued(t, cli, election, 2)
	electortest.Eventually(t, 5*testTTL, "the watcher subscribed and seeing zero-a", func() bool {
		_, live := w0.bus.state()
		return live && seen.last() == "zero-a"
	})

	one := in(1, "one")
	r1 := electortest.MustLead(t, electortest.Campaign(ctx, one), 5*testTTL, "one (database 1)")
	defer electortest.Resign(t, r1.Term)

	// A handover in database 0, published after all of database 1's
	// messages: once the watcher has it, it has had everything before it.
	electortest.Resign(t, ra.Term)
	electortest.MustLead(t, cb, 5*testTTL, "zero-b")
	electortest.Eventually(t, 5*testTTL, "the watcher to hear of zero-b's grant", func() bool { return heads.has("zero-b") })
	if heads.has("one") {
		t.Errorf("database 0's watcher received database 1's messages (heads %q)", heads.snapshot())
	}
	electortest.Eventually(t, 5*testTTL, "the watcher to see zero-b", func() bool { return seen.last() == "zero-b" })
	if got := seen.all(); slices.Contains(got, "one") {
		t.Errorf("database 0's watcher reported database 1's leader: %q", got)
	}
}

func (l *headLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.heads...)
}

// ids records the leader ids an Observe channel delivers ("" for none).
type ids struct {
	mu  sync.Mutex
	got []string
}

func observeIDs(ctx context.Context, e *Elector) *ids {
	r := &ids{}
	ch := e.Observe(ctx)
	go func() {
		for l := range ch {
			r.mu.Lock()
			r.got = append(r.got, l.ID)
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *ids) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func (r *ids) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		return ""
	}
	return r.got[len(r.got)-1]
}
