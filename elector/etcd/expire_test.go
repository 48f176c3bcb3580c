package etcd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// counted is a client that counts the RPCs it starts, by method.
type counted struct {
	*clientv3.Client
	mu    sync.Mutex
	calls map[string]int
}

// countedClient is a counted client of the members at addrs.
func countedClient(t *testing.T, addrs ...string) *counted {
	t.Helper()
	c := &counted{calls: map[string]int{}}
	note := func(method string) {
		c.mu.Lock()
		c.calls[method]++
		c.mu.Unlock()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: addrs, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				note(method)
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				note(method)
				return streamer(ctx, desc, cc, method, opts...)
			}),
		},
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c.Client = cli
	return c
}

func (c *counted) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

const timeToLive = "/etcdserverpb.Lease/LeaseTimeToLive"

// watchDeleted reports when a watch of key through cli (with opts), opened
// now, first sees it deleted. The watch ends with ctx or the test.
func watchDeleted(ctx context.Context, t *testing.T, cli *clientv3.Client, key string, opts ...clientv3.OpOption) <-chan time.Time {
	deleted := make(chan time.Time, 1)
	wctx, wcancel := context.WithCancel(ctx)
	t.Cleanup(wcancel)
	wch := cli.Watch(wctx, key, opts...)
	go func() {
		for wr := range wch {
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					deleted <- time.Now()
					return
				}
			}
		}
	}()
	return deleted
}

func newTestElector(t *testing.T, cli *clientv3.Client, election, id string, ttl time.Duration) *Elector {
	t.Helper()
	e, err := New(Config{Client: cli, Candidate: elector.Candidate{
		Election: election, ID: id, Timing: elector.Timing{TTL: ttl}, Logger: electortest.Logger()}})
	if err != nil {
		t.Fatalf("new elector: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// TestExpireNeverRevokesALiveLease renews a 2 s lease at irregular gaps of
// 1.1–1.95 s, so that its remaining time keeps dropping below a second and
// LeaseTimeToLive keeps answering 0, while a head waiter's expire loop
// watches it. Every renewal must succeed: a revocation of the live lease
// would answer "lease not found". Then the renewals stop, and the loop
// must revoke the lease, not before the store's expiry (last renewal's send
// + 2 s: the server and the test share this host's clock).
func TestExpireNeverRevokesALiveLease(t *testing.T) {
	srv := testenv.StartEtcd(t)
	cli := srv.Client(t)
	e := newTestElector(t, cli, "expire-live", "w", 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	g, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	key := "/expire-live/leader"
	if _, err := cli.Put(ctx, key, "l", clientv3.WithLease(g.ID)); err != nil {
		t.Fatalf("put: %v", err)
	}
	deleted := watchDeleted(ctx, t, cli, key)

	done := expireLoop(ctx, t, e, cli, key)

	lastSent := time.Now() // the put: the lease was granted before it
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		gap := 1100*time.Millisecond + rand.N(850*time.Millisecond)
		timer := time.NewTimer(gap) // the renewer's schedule, not synchronisation
		select {
		case <-timer.C:
		case at := <-deleted:
			t.Fatalf("the live lease was revoked at %s, %s after its last renewal", at.Format("15:04:05.000"), at.Sub(lastSent))
		}
		sent := time.Now()
		if _, err := cli.KeepAliveOnce(ctx, g.ID); err != nil {
			t.Fatalf("renewal after %s: %v (the expire loop revoked a live lease)", gap, err)
		}
		lastSent = sent
	}
	select {
	case at := <-deleted:
		if early := lastSent.Add(2 * time.Second).Sub(at); early > 0 {
			t.Fatalf("the key was deleted %s before its lease could expire", early)
		}
		t.Logf("revoked %s after the last renewal's send (lease 2 s)", at.Sub(lastSent).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("the lease was never deleted")
	}
	<-done
	if n := e.expired.Load(); n != 1 {
		t.Logf("the expire loop revoked %d leases: etcd's lessor came first", n)
	}
}

// TestExpiredLeaseIsNeverRenewed races renewals of a lease that has just
// expired against the head waiter's revocation (and etcd's own lessor):
// none of them may succeed. This is the property of etcd's lessor the
// expire loop relies on (Renew of an expired lease waits for its
// revocation and answers "lease not found").
func TestExpiredLeaseIsNeverRenewed(t *testing.T) {
	srv := testenv.StartEtcd(t)
	cli := srv.Client(t)
	e := newTestElector(t, cli, "expire-race", "w", 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for trial := range 3 {
		g, err := cli.Grant(ctx, 2)
		if err != nil {
			t.Fatalf("grant: %v", err)
		}
		granted := time.Now() // after the store granted it: the lease ends before granted + 2 s
		key := fmt.Sprintf("/expire-race/%d", trial)
		if _, err := cli.Put(ctx, key, "l", clientv3.WithLease(g.ID)); err != nil {
			t.Fatalf("put: %v", err)
		}
		done := expireLoop(ctx, t, e, cli, key)
		// Renew from just after the lease's end until it is gone.
		timer := time.NewTimer(time.Until(granted.Add(2*time.Second + time.Millisecond)))
		<-timer.C
		var renewed, refused atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					_, err := cli.KeepAliveOnce(ctx, g.ID)
					switch {
					case err == nil:
						renewed.Add(1)
					case errors.Is(err, rpctypes.ErrLeaseNotFound):
						refused.Add(1)
						return
					default:
						t.Errorf("renewal: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		<-done
		if n := renewed.Load(); n > 0 {
			t.Fatalf("trial %d: %d renewals of an expired lease succeeded", trial, n)
		}
		t.Logf("trial %d: %d renewals refused; the expire loop revoked %d leases so far", trial, refused.Load(), e.expired.Load())
	}
}

// TestHeadWaiterRevokesCutOffLeader cuts the leader off the store, then
// its successor, three times over; each time the next in line, the head
// waiter, must take over only after the leader's term ended, and in at
// least one of the three it must have revoked the lease itself (etcd's
// lessor, which runs every 500 ms, can come first now and then). The
// third candidate, not at the head until the second leads, must not ask
// about a lease before; the head waiter asks at most once per 3/4 of its
// renewal interval while the leader lives.
func TestHeadWaiterRevokesCutOffLeader(t *testing.T) {
	const ttl = 2 * time.Second
	srv := testenv.StartEtcd(t)
	ctx := context.Background()
	revoked := map[string]uint64{}
	for trial := range 3 {
		election := fmt.Sprintf("expire-cut-%d", trial)
		pa, pb := faultproxy.Start(t, srv.Endpoint()), faultproxy.Start(t, srv.Endpoint())
		a := newTestElector(t, testenv.EtcdClient(t, pa.Addr()), election, "a", ttl)
		bc := countedClient(t, pb.Addr())
		b := newTestElector(t, bc.Client, election, "b", ttl)
		cc := countedClient(t, srv.Endpoint())
		c := newTestElector(t, cc.Client, election, "c", ttl)

		ta, err := a.Campaign(ctx)
		if err != nil {
			t.Fatalf("a: %v", err)
		}
		won := make(chan *elector.Term, 2)
		for i, w := range []*Elector{b, c} {
			go func() {
				if term, err := w.Campaign(ctx); err == nil {
					won <- term
				}
			}()
			electortest.Eventually(t, 10*time.Second, "the waiter queued", func() bool {
				return queued(t, srv, election) == i+2
			})
		}
		idleFrom := bc.count(timeToLive)
		idle := 3 * ttl
		timer := time.NewTimer(idle) // a window in which to count requests
		<-timer.C
		asked := bc.count(timeToLive) - idleFrom
		if most := int(idle/(ttl/5*3/4)) + 1; asked > most {
			t.Fatalf("the head waiter asked %d times in %s, more than once per 3/4 of a renewal interval (%d)", asked, idle, most)
		}
		if n := cc.count(timeToLive); n != 0 {
			t.Fatalf("c, not at the head, asked about a lease %d times", n)
		}

		prev := ta
		for _, step := range []struct {
			cut  *faultproxy.Proxy
			next string
			w    *Elector
		}{{pa, "b", b}, {pb, "c", c}} {
			step.cut.Cut()
			var term *elector.Term
			select {
			case term = <-won:
			case <-time.After(ttl + 10*time.Second):
				t.Fatalf("no successor to the cut-off leader (%s expected)", step.next)
			}
			<-prev.Done()
			if term.Leader.ID != step.next {
				t.Fatalf("%s led, not the head waiter %s", term.Leader.ID, step.next)
			}
			if !prev.ValidUntil().Before(term.Leader.Since) {
				t.Fatalf("%s led at %s, before its predecessor's term ended (valid until %s)", step.next, term.Leader.Since, prev.ValidUntil())
			}
			t.Logf("trial %d: %s led %s after its predecessor's deadline; revoked it itself: %d",
				trial, step.next, term.Leader.Since.Sub(prev.ValidUntil()).Round(time.Millisecond), step.w.expired.Load())
			revoked[step.next] += step.w.expired.Load()
			prev = term
			// A leader whose term began without a claim writes its start
			// of term just after; the head waiter watches its lease from
			// then on (proclaimUntil). Cut it only once it has.
			electortest.Eventually(t, 5*time.Second, step.next+"'s start of term on its key", func() bool {
				g, err := srv.Client(t).Get(ctx, DefaultPrefix+election+"/", clientv3.WithFirstCreate()...)
				return err == nil && len(g.Kvs) == 1 && g.Kvs[0].CreateRevision == int64(term.Token) &&
					!decodeValue(g.Kvs[0].Value).Since.IsZero()
			})
		}
		t.Logf("trial %d: b asked %d times in %s of an idle leader", trial, asked, idle)
		if err := prev.Resign(ctx); err != nil {
			t.Fatalf("c resign: %v", err)
		}
	}
	for _, id := range []string{"b", "c"} {
		if revoked[id] == 0 {
			t.Errorf("in three failovers %s, at the head, never revoked its leader's expired lease itself", id)
		}
	}
}

// leaderKey reads key as the head waiter would have seen it.
// expireLoop reads the leader key at key through cli and runs e's expire
// loop on it, as a head waiter does; the channel is closed once the loop
// returns.
func expireLoop(ctx context.Context, t *testing.T, e *Elector, cli *clientv3.Client, key string) <-chan struct{} {
	t.Helper()
	kv := leaderKey(ctx, t, cli, key)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.expire(ctx, kv, value{ID: "l", Since: time.Now()})
	}()
	return done
}

func leaderKey(ctx context.Context, t *testing.T, cli *clientv3.Client, key string) *mvccpb.KeyValue {
	t.Helper()
	g, err := cli.Get(ctx, key)
	if err != nil || len(g.Kvs) != 1 {
		t.Fatalf("get %s: %v (%d keys)", key, err, len(g.Kvs))
	}
	return g.Kvs[0]
}

func queued(t *testing.T, srv *testenv.Etcd, election string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := srv.Client(t).Get(ctx, DefaultPrefix+election+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("count candidates: %v", err)
	}
	return int(resp.Count)
}
