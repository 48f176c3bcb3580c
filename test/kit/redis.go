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

// redisServers are a Redis store's: one server (redis), a Sentinel
// topology (redis+sentinel) or a Redis Cluster (redis+cluster), read
// through one client of the kind the topology takes (a plain client, a
// failover client through the sentinels, a cluster client).
type redisServers struct {
	servers
	dial func(t testing.TB) redis.UniversalClient
	once sync.Once
	cli  redis.UniversalClient
}

// newRedis is the Servers of srv, a Redis server or topology made by its
// entry with t, whose own --store is url; dial makes its client, closed
// when its t ends.
func newRedis(t testing.TB, srv lifecycle, url string, reach Reach, dial func(t testing.TB) redis.UniversalClient) *redisServers {
	return &redisServers{servers: servers{value: srv, srv: srv, scheme: "redis", url: url, reach: reach, t: t}, dial: dial}
}

// client is the store's client, made on first use.
func (r *redisServers) client() redis.UniversalClient {
	r.once.Do(func() { r.cli = r.dial(r.t) })
	return r.cli
}

// eachMaster runs f on every master: the one server, the sentinels'
// master, every master of a cluster.
func (r *redisServers) eachMaster(ctx context.Context, f func(*redis.Client) error) error {
	switch c := r.client().(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error { return f(m) })
	case *redis.Client:
		return f(c)
	default:
		return fmt.Errorf("no masters in a %T", c)
	}
}

func (r *redisServers) Queued(t testing.TB, election string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	n, err := r.client().ZCard(ctx, "electd:{"+election+"}:queue").Result()
	if err != nil {
		t.Fatalf("count candidates: %v", err)
	}
	return int(n)
}

func (r *redisServers) LastRun(t testing.TB, election string) *RunRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	b, err := r.client().Get(ctx, "electd:{"+election+"}:lastrun").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		t.Fatalf("read the run record: %v", err)
	}
	return decodeRun(t, b)
}

// RefuseWrites sets maxmemory 1 on every master: each write is refused
// with OOM (no eviction policy is set).
func (r *redisServers) RefuseWrites(t testing.TB) (string, func()) {
	t.Helper()
	set := func(v string) {
		t.Helper()
		ctx := context.Background()
		if err := r.eachMaster(ctx, func(m *redis.Client) error { return m.ConfigSet(ctx, "maxmemory", v).Err() }); err != nil {
			t.Fatal(err)
		}
	}
	set("1")
	return "OOM", func() { set("0") }
}

// Counts is INFO commandstats of every master, summed.
func (r *redisServers) Counts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	err := r.eachMaster(ctx, func(m *redis.Client) error {
		stats, err := testenv.RedisCommandStats(ctx, m)
		for k, v := range stats {
			out[k] += v
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RoundTrips counts the commands a client sends (electd runs everything
// else inside its scripts).
func (r *redisServers) RoundTrips(d map[string]int) int {
	n := 0
	for _, c := range []string{"evalsha", "eval", "ping", "subscribe"} {
		n += d[c]
	}
	return n
}
