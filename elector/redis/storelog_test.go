package redis

import (
	"context"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// TestStoreDownLogged: a campaign against a stopped Redis warns once about
// its failing joins and subscriptions, not at every retry (before, it did
// not warn at all after electd's start), and says when Redis answers again.
func TestStoreDownLogged(t *testing.T) {
	srv, _ := startRedis(t)
	logs, log := electortest.NewLogs()
	e := newElectorWith(t, Config{Client: newClient(t, srv.Addr()), Candidate: elector.Candidate{Election: "down", ID: "a", Timing: testTiming(), Logger: log}})

	srv.Stop(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	won := electortest.Campaign(ctx, e)
	for _, op := range []string{"join", "watch"} {
		logs.WaitStoreFailures(t, 30*time.Second, op, 3, start)
	}

	srv.Start(t)
	electortest.MustLead(t, won, 30*time.Second, "a")
	for _, op := range []string{"join", "watch"} {
		logs.WaitStoreRecovery(t, 10*time.Second, op)
	}
}
