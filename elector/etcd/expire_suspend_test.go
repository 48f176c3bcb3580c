package etcd

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// pump drives a fake clock in step with real time, except while paused:
// a host whose CLOCK_MONOTONIC stands still (suspend, a paused VM) while
// the store and the leader run on.
type pump struct {
	fake   *clock.Fake
	mu     sync.Mutex
	paused bool
	from   time.Time // real time of the pause
	last   time.Time
}

func startPump(t *testing.T) *pump {
	p := &pump{fake: clock.NewFake(time.Now()), last: time.Now()}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			p.mu.Lock()
			now := time.Now()
			d := now.Sub(p.last)
			p.last = now
			paused := p.paused
			p.mu.Unlock()
			if !paused {
				p.fake.Advance(d)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return p
}

func (p *pump) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused, p.from = true, time.Now()
	}
}

func (p *pump) resume() {
	p.mu.Lock()
	d := time.Since(p.from)
	p.paused = false
	p.last = time.Now()
	p.mu.Unlock()
	p.fake.Suspend(d) // what Real.Suspended would report after a resume
}

// TestSuspendedWaiterSparesALiveLease: the head waiter reads 0 (a chain
// starts), then its host is suspended for 1.25 s (its monotonic clock
// stands still); meanwhile the leader renews, in time. After the resume
// the waiter's next readings are 0 too (the leader is slow, but its
// deadline holds). On the waiter's clock alone the links look short and
// the chain a proof; counting the suspension, they are not, and the lease
// must be left alone until it really expires. (Without the suspension in
// the gap, the key was deleted with ~200 ms of the leader's deadline left.)
func TestSuspendedWaiterSparesALiveLease(t *testing.T) {
	srv := testenv.StartEtcd(t)
	cli := srv.Client(t)
	p := startPump(t)

	var firstZero atomic.Bool
	zero := make(chan time.Time, 1)
	wcli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if r, ok := reply.(*pb.LeaseTimeToLiveResponse); ok && err == nil && r.TTL == 0 && firstZero.CompareAndSwap(false, true) {
				p.pause() // the host sleeps right after this answer arrives
				zero <- time.Now()
			}
			return err
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wcli.Close() })
	e, err := New(Config{Client: wcli, Candidate: elector.Candidate{
		Election: "expire-suspend", ID: "w", Timing: elector.Timing{TTL: 2 * time.Second},
		Logger: electortest.Logger(), Clock: p.fake}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	window := elector.Timing{TTL: 2 * time.Second}.WithDefaults().Window()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	grantSent := time.Now()
	g, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	key := "/expire-suspend/leader"
	if _, err := cli.Put(ctx, key, "l", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	deleted := watchDeleted(ctx, t, cli, key)
	done := expireLoop(ctx, t, e, cli, key)

	a0 := <-zero // chain starts; the waiter is now "suspended"
	leaderDeadline := grantSent.Add(window)
	renewAt := a0.Add(500 * time.Millisecond)
	if lim := grantSent.Add(1900 * time.Millisecond); lim.Before(renewAt) {
		renewAt = lim
	}
	time.Sleep(time.Until(renewAt))
	sent := time.Now()
	if !sent.Before(leaderDeadline) {
		t.Fatalf("renewal at %s is past the grant's deadline", sent.Sub(grantSent))
	}
	if _, err := cli.KeepAliveOnce(ctx, g.ID); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	leaderDeadline = sent.Add(window)
	time.Sleep(time.Until(renewAt.Add(750 * time.Millisecond)))
	p.resume()
	t.Logf("first 0 at +%s after grant; renewed at +%s; waiter suspended %s", a0.Sub(grantSent).Round(time.Millisecond),
		sent.Sub(grantSent).Round(time.Millisecond), time.Since(a0).Round(time.Millisecond))

	var at time.Time
	select {
	case at = <-deleted:
	case <-ctx.Done():
		t.Fatal("never deleted")
	}
	cancel()
	<-done
	left := leaderDeadline.Sub(at)
	t.Logf("key deleted at +%s; the leader's deadline (last renewal's send + %s) was %s ahead; the store's lease had ~%s left; revoked by the waiter: %d",
		at.Sub(grantSent).Round(time.Millisecond), window, left.Round(time.Millisecond), sent.Add(2*time.Second).Sub(at).Round(time.Millisecond), e.expired.Load())
	if left > 0 {
		t.Errorf("SAFETY: the key of a leader whose deadline had %s left was deleted (waiter revocations: %d)", left.Round(time.Millisecond), e.expired.Load())
	}
}
