package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/etcd"
	"github.com/electd/electd/internal/testenv"
)

// TestStoreDownLogged: a campaign against a stopped etcd warns once about
// its failing attempts, not at every retry, and says when etcd answers
// again.
func TestStoreDownLogged(t *testing.T) {
	srv := testenv.StartEtcd(t)
	logs, log := electortest.NewLogs()
	e, err := etcd.New(etcd.Config{Client: testenv.EtcdClient(t, srv.Endpoint()), Candidate: elector.Candidate{Election: "down", ID: "a",
		Timing: timingOf(2 * time.Second), Logger: log}})
	if err != nil {
		t.Fatalf("new elector: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })

	srv.Stop(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	won := make(chan error, 1)
	go func() {
		_, err := e.Campaign(ctx)
		won <- err
	}()
	logs.WaitStoreFailures(t, 30*time.Second, "campaign", 3, start)

	srv.Start(t)
	select {
	case err := <-won:
		if err != nil {
			t.Fatalf("campaign after etcd came back: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("no term after etcd came back")
	}
	logs.WaitStoreRecovery(t, 10*time.Second, "campaign")
}
