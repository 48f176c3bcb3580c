package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// TestChannelNamesTheDatabase: the same election in databases 0 and 1 of
// the same servers subscribes two channels (channels are server-wide, keys
// are not), so neither side hears the other's messages.
func TestChannelNamesTheDatabase(t *testing.T) {
	h := newHarness(t, 3)
	const election = "two-dbs"
	ctx := context.Background()
	for db, id := range []string{"zero", "one"} {
		var servers []Server
		for _, a := range h.addrs() {
			c := redis.NewClient(&redis.Options{Addr: a, DB: db, ContextTimeoutEnabled: true, MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			servers = append(servers, Server{Addr: a, Client: c})
		}
		e, err := New(Config{Servers: servers, Candidate: elector.Candidate{Election: election, ID: id, Timing: elector.Timing{TTL: time.Second}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		if _, err := e.Leader(ctx); err != nil && !errors.Is(err, elector.ErrNoLeader) {
			t.Fatalf("%s: Leader: %v", id, err)
		}
	}
	const db0, db1 = "electd:{two-dbs}:rl:events", "electd:{two-dbs}:rl:db1:events"
	for i, c := range h.clis {
		var got map[string]int64
		electortest.Eventually(t, 5*time.Second, "both electors subscribed", func() bool {
			var err error
			got, err = c.PubSubNumSub(ctx, db0, db1).Result()
			return err == nil && got[db0]+got[db1] == 2
		})
		if got[db0] != 1 || got[db1] != 1 {
			t.Errorf("server %d: subscribers %v, want one of each channel: the two databases share one", i, got)
		}
	}
}
