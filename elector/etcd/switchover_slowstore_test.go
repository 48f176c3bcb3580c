package etcd

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// TestFailedSwitchoverOnSlowStoreLeavesLeaderKey: the leader's link to the
// store is slow but answering (1.2 s round trips, under the 2 s request
// timeout of a 10 s TTL), and the named successor t closes while the
// switchover runs (between the leader's read of the queue and its
// transaction). The switchover cannot be done; per handTo's contract the
// revocation alone must then resign plainly, so that b, next in line,
// leads at once. ResignTo gets the supervisor's budget (RenewInterval +
// 1 s, supervisor.give). From the adversarial review of 9c934b3: the
// retry's read runs the budget out, handTo revokes with the expired
// context (nothing is sent), and the renewal loop no longer revokes a
// resigned session's lease: the leader's key stays until its lease
// expires on the store, and b leads only about a TTL later, though the
// link is fast again as soon as ResignTo returns.
func TestFailedSwitchoverOnSlowStoreLeavesLeaderKey(t *testing.T) {
	srv := testenv.StartEtcd(t)
	const election = "slow-switch"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := faultproxy.Start(t, srv.Endpoint())

	var (
		armed   atomic.Bool
		closeT  func()
		closeMu sync.Mutex
	)
	acli := switchoverWatchedClient(t, p.Addr(), func(send func() error) error {
		if armed.Load() {
			// The switchover's transaction: t leaves first.
			closeMu.Lock()
			if closeT != nil {
				closeT()
				closeT = nil
			}
			closeMu.Unlock()
		}
		return send()
	})

	const ttl = 10 * time.Second // renewals every 2 s, the request timeout
	te, ra, cb, _ := queueOfThree(t, ctx, srv, acli, election, ttl, "t")
	closeT = func() { _ = te.Close() } // before armed: acli calls it only once armed
	if err := ra.Term.Queued(ctx, "t"); err != nil {
		t.Fatalf("Queued(t) = %v", err)
	}

	p.SetDelay(600 * time.Millisecond)
	armed.Store(true)
	budget := elector.Timing{TTL: ttl}.WithDefaults().RenewInterval + time.Second
	rctx, rcancel := context.WithTimeout(ctx, budget)
	defer rcancel()
	rerr := ra.Term.ResignTo(rctx, "t")
	p.SetDelay(0)
	end := time.Now()
	t.Logf("ResignTo(t) = %v", rerr)
	if rerr == nil {
		t.Fatalf("the switchover reported success, though t left")
	}
	rb := electortest.MustLead(t, cb, 3*time.Second, "b (next in line, after a switchover that could not be done)")
	t.Logf("b led %s after ResignTo returned", rb.At.Sub(end))
}
