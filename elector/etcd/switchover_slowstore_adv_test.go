package etcd

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

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
	acli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{p.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if r, ok := req.(*etcdserverpb.TxnRequest); ok && armed.Load() {
					for _, op := range r.Success {
						if op.GetRequestDeleteRange() != nil {
							// The switchover's transaction: t leaves first.
							closeMu.Lock()
							if closeT != nil {
								closeT()
								closeT = nil
							}
							closeMu.Unlock()
							break
						}
					}
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			})},
	})
	if err != nil {
		t.Fatalf("a's client: %v", err)
	}
	t.Cleanup(func() { _ = acli.Close() })

	const ttl = 10 * time.Second // renewals every 2 s, the request timeout
	a := newTestElector(t, acli, election, "a", ttl)
	b := newTestElector(t, srv.Client(t), election, "b", ttl)
	te := newTestElector(t, srv.Client(t), election, "t", ttl)
	closeT = func() { _ = te.Close() }
	cli := srv.Client(t)
	queued := func(n int64) func() bool {
		return func() bool {
			g, err := cli.Get(ctx, DefaultPrefix+election+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err == nil && g.Count == n
		}
	}
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 5*time.Second, "b queued", queued(2))
	_ = electortest.Campaign(ctx, te)
	electortest.Eventually(t, 5*time.Second, "t queued", queued(3))
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
