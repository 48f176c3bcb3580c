package etcd

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// TestOwnKeyGoneBeforeTermBegins: a leader a, a waiter b behind it, and c
// behind b. a resigns at revision R; b's read of the election (firstNow)
// is held back while b's lease is revoked (its key deleted at R' > R) and
// c, now first, begins its term. Then b's read is let go: b must not begin
// a term whose key is already gone while c holds one (a claim's
// transaction, which checks the key now, would refuse it, and b would
// queue again behind c). From the adversarial review of 14c6158, whose
// successor read the election at R; it failed there.
func TestOwnKeyGoneBeforeTermBegins(t *testing.T) {
	srv := testenv.StartEtcd(t)
	cli := srv.Client(t)
	const election = "ownkey-gone"
	pfx := DefaultPrefix + election + "/"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// b's client holds back its first read of the election with a
	// create-revision bound: firstNow's read.
	var (
		once     sync.Once
		reached  = make(chan int64, 1)
		letGo    = make(chan struct{})
		letGoFn  = sync.OnceFunc(func() { close(letGo) })
		blocking = true
		mu       sync.Mutex
	)
	defer letGoFn()
	bcli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if r, ok := req.(*etcdserverpb.RangeRequest); ok && r.MaxCreateRevision > 0 {
					mu.Lock()
					hold := blocking
					blocking = false
					mu.Unlock()
					if hold {
						once.Do(func() { reached <- r.Revision })
						select {
						case <-letGo:
						case <-ctx.Done():
							return ctx.Err()
						}
					}
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			})},
	})
	if err != nil {
		t.Fatalf("b's client: %v", err)
	}
	t.Cleanup(func() { _ = bcli.Close() })

	timing := elector.Timing{TTL: 10 * time.Second} // b's renewals are seconds apart
	a := newTestElector(t, cli, election, "a", timing.TTL)
	b := newTestElector(t, bcli, election, "b", timing.TTL)
	c := newTestElector(t, srv.Client(t), election, "c", timing.TTL)

	count := func() int64 {
		g, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return -1
		}
		return g.Count
	}
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("a campaign: %v", err)
	}
	type result struct {
		term *elector.Term
		err  error
	}
	campaign := func(e *Elector) <-chan result {
		ch := make(chan result, 1)
		go func() {
			term, err := e.Campaign(ctx)
			ch <- result{term, err}
		}()
		return ch
	}
	bch := campaign(b)
	electortest.Eventually(t, 10*time.Second, "b queued", func() bool { return count() == 2 })
	cch := campaign(c)
	electortest.Eventually(t, 10*time.Second, "c queued", func() bool { return count() == 3 })

	g, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(g.Kvs) != 3 {
		t.Fatalf("the queue: %v %v", g, err)
	}
	bLease := clientv3.LeaseID(g.Kvs[1].Lease)

	if err := ta.Resign(ctx); err != nil {
		t.Fatalf("a resign: %v", err)
	}
	var r int64
	select {
	case r = <-reached:
	case <-time.After(10 * time.Second):
		t.Fatal("b never read the election at a's deletion")
	}
	// b's key goes (its lease revoked: etcd's expiry, an operator) after R.
	rv, err := cli.Revoke(ctx, bLease)
	if err != nil {
		t.Fatalf("revoke b's lease: %v", err)
	}
	var tc *elector.Term
	select {
	case res := <-cch:
		if res.err != nil {
			t.Fatalf("c campaign: %v", res.err)
		}
		tc = res.term
	case <-time.After(10 * time.Second):
		t.Fatal("c did not lead after b's key was deleted")
	}
	letGoFn()

	// A correct b queues again (a new key behind c's); a b that leads on
	// its read at R returns a term.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case res := <-bch:
			if res.err != nil {
				t.Fatalf("b campaign: %v", res.err)
			}
			bErr, cErr := res.term.Err(), tc.Err()
			t.Fatalf("b began a term (token %d, err %v) on its read at a's deletion (rev %d) although its key was deleted at rev %d, after which c began its term (token %d, err %v): two terms at once",
				res.term.Token, bErr, r, rv.Header.Revision, tc.Token, cErr)
		case <-time.After(20 * time.Millisecond):
		}
		if count() == 2 && tc.Err() == nil {
			return // b queued behind c
		}
	}
	t.Fatal("b neither queued again nor led")
}
