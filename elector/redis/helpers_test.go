package redis

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// Short leases keep the suite fast: TTL 1 s, renewals every 200 ms.
const testTTL = time.Second

func testTiming() elector.Timing { return elector.Timing{TTL: testTTL} }

// newClient dials addr the way electd should: with context deadlines honoured.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	cli := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
	})
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// countingInstrument counts store errors, in all and by "op class".
type countingInstrument struct {
	elector.NopInstrument
	n atomic.Int64

	mu       sync.Mutex
	classes  map[string]int
	answered int
}

func (c *countingInstrument) StoreError(op string, err error) {
	c.n.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.classes == nil {
		c.classes = map[string]int{}
	}
	c.classes[op+" "+elector.ErrorClass(err)]++
}

func (c *countingInstrument) StoreAnswered(string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answered++
}

// snapshot returns the counts by "op class".
func (c *countingInstrument) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.classes)
}

// count returns the errors of op with class.
func (c *countingInstrument) count(op, class string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.classes[op+" "+class]
}

// newElector makes a candidate of election dialing addr, closed at cleanup.
func newElector(t testing.TB, addr, election, id string) *Elector {
	t.Helper()
	return newElectorWith(t, Config{Client: newClient(t, addr), Candidate: elector.Candidate{Election: election, ID: id, Address: "http://" + id + ".test", Timing: testTiming()}})
}

func newElectorWith(t testing.TB, cfg Config) *Elector {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = electortest.Logger()
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// queued counts the live candidates of election by the server's clock.
func queued(t testing.TB, cli redis.UniversalClient, election string) int {
	t.Helper()
	k := keysFor(election)
	n, err := cli.Eval(context.Background(), `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%.0f', now), '+inf')`, []string{k.expiry}).Int()
	if err != nil {
		t.Fatalf("count candidates: %v", err)
	}
	return n
}

func waitQueued(t testing.TB, cli redis.UniversalClient, election string, n int) {
	t.Helper()
	electortest.Eventually(t, 10*time.Second, strconv.Itoa(n)+" queued candidates", func() bool { return queued(t, cli, election) == n })
}

// electionKeys lists the election's keys and every member or field that
// names a candidate entry.
func electionKeys(t testing.TB, cli *redis.Client, election string) (keyNames []string, entries []string) {
	t.Helper()
	ctx := context.Background()
	iter := cli.Scan(ctx, 0, "electd:{"+election+"}:*", 100).Iterator()
	for iter.Next(ctx) {
		keyNames = append(keyNames, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	k := keysFor(election)
	for _, key := range []string{k.queue, k.expiry} {
		m, err := cli.ZRange(ctx, key, 0, -1).Result()
		if err != nil {
			t.Fatalf("zrange %s: %v", key, err)
		}
		entries = append(entries, m...)
	}
	f, err := cli.HKeys(ctx, k.cand).Result()
	if err != nil {
		t.Fatalf("hkeys: %v", err)
	}
	entries = append(entries, f...)
	if h, err := cli.HGet(ctx, k.term, "entry").Result(); err == nil {
		entries = append(entries, h)
	}
	return keyNames, entries
}

func startRedis(t testing.TB) (*testenv.Redis, *redis.Client) {
	t.Helper()
	srv := testenv.StartRedis(t)
	return srv, newClient(t, srv.Addr())
}

// leaderAndWaiter makes candidates a and b of election on srv: a leads, and
// b's campaign (with ctx) waits in the queue behind it.
func leaderAndWaiter(ctx context.Context, t *testing.T, srv *testenv.Redis, cli *redis.Client, election string) (a, b *Elector, ra electortest.Result, cb <-chan electortest.Result) {
	t.Helper()
	a, b = newElector(t, srv.Addr(), election, "a"), newElector(t, srv.Addr(), election, "b")
	ra = electortest.MustLead(t, electortest.Campaign(context.Background(), a), 5*testTTL, "a")
	cb = electortest.Campaign(ctx, b)
	waitQueued(t, cli, election, 2)
	return a, b, ra, cb
}
