package redis

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediskit"
	"github.com/electd/electd/elector/internal/redistest"
	"github.com/electd/electd/internal/faultproxy"
)

// TestSlowStoreAfterReconnect: a store whose round trip (140 ms) fits the
// request timeout (200 ms at TTL 1 s) on an open connection, but not the
// two round trips a new connection needs (HELLO, then the script). Once
// every connection is reset, a fixed timeout never gets a reply again:
// each request times out, which closes its connection, so the next one
// starts over. With patience the retry waits longer, gets its reply, and
// the connection it made serves the renewals after it: the leader renews
// again (or, had its lease lapsed meanwhile, wins again).
func TestSlowStoreAfterReconnect(t *testing.T) {
	srv, _ := startRedis(t)
	p := faultproxy.Start(t, srv.Addr())
	cli := redis.NewClient(rediskit.ClientOptions(p.Addr()))
	t.Cleanup(func() { _ = cli.Close() })
	a := newElectorWith(t, Config{Client: cli, Candidate: elector.Candidate{
		Election: "slow", ID: "a", Timing: testTiming()}})
	redistest.SlowAfterReconnect(t, redistest.Slow{Candidate: a, Proxies: []*faultproxy.Proxy{p},
		TTL: testTTL, Delay: 70 * time.Millisecond, AfterReset: 10 * time.Second})
}
