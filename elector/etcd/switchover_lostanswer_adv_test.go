package etcd

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// TestSwitchoverAnswerLost: the leader's switchover transaction commits on
// the store, but its answer is lost (the connection drops after the
// request went out). The named successor c leads with a greater token, as
// asked; ResignTo must then not report that the term went elsewhere. From
// the adversarial review of 9c934b3: stepAside returns the store error
// without looking whether the hand-over landed, handTo revokes and returns
// it, and the supervisor logs "switchover did not hand the term to the
// named candidate; it went to the next in line" (electd switchover exits
// non-zero) while c leads.
func TestSwitchoverAnswerLost(t *testing.T) {
	srv := testenv.StartEtcd(t)
	const election = "answer-lost"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var lose atomic.Bool
	var lost atomic.Int32
	acli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoker(ctx, method, req, reply, cc, opts...)
				if r, ok := req.(*etcdserverpb.TxnRequest); ok && err == nil && lose.Load() {
					for _, op := range r.Success {
						if op.GetRequestDeleteRange() != nil {
							lost.Add(1)
							return status.Error(codes.Unavailable, "answer lost (test)")
						}
					}
				}
				return err
			})},
	})
	if err != nil {
		t.Fatalf("a's client: %v", err)
	}
	t.Cleanup(func() { _ = acli.Close() })

	const ttl = 6 * time.Second
	a := newTestElector(t, acli, election, "a", ttl)
	b := newTestElector(t, srv.Client(t), election, "b", ttl)
	c := newTestElector(t, srv.Client(t), election, "c", ttl)
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
	cc := electortest.Campaign(ctx, c)
	electortest.Eventually(t, 5*time.Second, "c queued", queued(3))

	lose.Store(true)
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	rerr := ra.Term.ResignTo(rctx, "c")
	rc := electortest.MustLead(t, cc, ttl/3, "c")
	electortest.StillWaiting(t, cb, "b")
	if rc.Term.Token <= ra.Term.Token {
		t.Fatalf("c's token %d after a's %d", rc.Term.Token, ra.Term.Token)
	}
	if lost.Load() == 0 {
		t.Fatalf("the switchover's transaction was not seen")
	}
	if rerr != nil {
		t.Fatalf("c leads (token %d) as the switchover asked, yet ResignTo reported: %v", rc.Term.Token, rerr)
	}
}
