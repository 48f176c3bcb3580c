package kit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/testenv"
)

// redlockServers are a Redlock quorum's independent redis-servers, each
// with a copy of the election's state of its own (keys
// electd:{NAME}:rl:…), read through a client of each.
type redlockServers struct {
	servers
	rl   *testenv.Redlock
	once sync.Once
	clis []*redis.Client
}

// newRedlock is the Servers of the quorum rl, made by its entry with t.
// Kill and Start act on every server; a Link is a proxy per server.
func newRedlock(t testing.TB, rl *testenv.Redlock) *redlockServers {
	return &redlockServers{rl: rl, servers: servers{value: rl, srv: redlockAll{rl}, scheme: "redlock", url: rl.URL(),
		reach: Reach{Addrs: rl.Addrs()}, t: t}}
}

// redlockAll kills and starts every server of a quorum.
type redlockAll struct{ r *testenv.Redlock }

func (a redlockAll) Kill(t testing.TB)  { t.Helper(); a.r.KillAll(t) }
func (a redlockAll) Start(t testing.TB) { t.Helper(); a.r.StartAll(t) }

// clients are a client of each server, in order, made on first use.
func (r *redlockServers) clients() []*redis.Client {
	r.once.Do(func() { r.clis = r.rl.Clients(r.t) })
	return r.clis
}

func (r *redlockServers) Queued(t testing.TB, election string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	var n int64
	for _, c := range r.clients() {
		m, err := liveEntries(ctx, c, "electd:{"+election+"}:rl:expiry")
		if err != nil {
			t.Fatalf("count candidates: %v", fmt.Errorf("%s: %w", c.Options().Addr, err))
		}
		n = max(n, m)
	}
	return int(n)
}

// liveEntries counts the members of the sorted set expiry (entry → lease
// deadline in the server's microseconds) whose deadline is after the
// server's TIME. A candidate's renewal that a partition held back (a
// proxy delivers what it held on Heal, as TCP does after a healed
// partition) may reach a server after the candidate left it: the server
// takes the entry back, by design (a server that lost an entry takes it
// back at its next step), for one TTL, and keeps it, dead, until a step
// of another candidate prunes it.
func liveEntries(ctx context.Context, c *redis.Client, expiry string) (int64, error) {
	now, err := c.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return c.ZCount(ctx, expiry, fmt.Sprintf("(%d", now.UnixMicro()), "+inf").Result()
}

func (r *redlockServers) LastRun(t testing.TB, election string) *RunRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	var newest *RunRecord
	for _, c := range r.clients() {
		b, err := c.Get(ctx, "electd:{"+election+"}:rl:lastrun").Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			t.Fatalf("read the run record on %s: %v", c.Options().Addr, err)
		}
		if rec := decodeRun(t, b); newest == nil || rec.Finished.After(newest.Finished) {
			newest = rec
		}
	}
	return newest
}

// RefuseWrites sets maxmemory 1 on every server of the quorum: each
// write is refused with OOM.
func (r *redlockServers) RefuseWrites(t testing.TB) (string, func()) {
	t.Helper()
	set := func(v string) {
		t.Helper()
		ctx := context.Background()
		var errs []error
		for _, c := range r.clients() {
			errs = append(errs, c.ConfigSet(ctx, "maxmemory", v).Err())
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	set("1")
	return "OOM", func() { set("0") }
}
