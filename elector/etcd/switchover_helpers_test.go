package etcd

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// Helpers of the switchover fault tests (switchover_lostanswer_test.go,
// switchover_slowstore_test.go).

// switchoverWatchedClient is a's client of the store at endpoint: every
// switchover transaction it sends (a Txn that deletes a key when it
// succeeds) goes through around, which calls send to send it; every other
// request goes out as it is.
func switchoverWatchedClient(t *testing.T, endpoint string, around func(send func() error) error) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				send := func() error { return invoker(ctx, method, req, reply, cc, opts...) }
				if r, ok := req.(*etcdserverpb.TxnRequest); ok {
					for _, op := range r.Success {
						if op.GetRequestDeleteRange() != nil {
							return around(send)
						}
					}
				}
				return send()
			})},
	})
	if err != nil {
		t.Fatalf("a's client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// queueOfThree makes three candidates of election at ttl: a on acli, b
// and then third (named name) on their own clients of srv. a leads, then b
// and third queue behind it, each once a client of srv sees its key. It
// returns third, a's term and the campaigns of b and third.
func queueOfThree(t *testing.T, ctx context.Context, srv *testenv.Etcd, acli *clientv3.Client, election string, ttl time.Duration, name string) (*Elector, electortest.Result, <-chan electortest.Result, <-chan electortest.Result) {
	t.Helper()
	a := newTestElector(t, acli, election, "a", ttl)
	b := newTestElector(t, srv.Client(t), election, "b", ttl)
	third := newTestElector(t, srv.Client(t), election, name, ttl)
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
	c3 := electortest.Campaign(ctx, third)
	electortest.Eventually(t, 5*time.Second, name+" queued", queued(3))
	return third, ra, cb, c3
}
