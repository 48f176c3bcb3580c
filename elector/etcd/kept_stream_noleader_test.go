package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electd/electd/internal/testenv"
)

// TestKeptStreamStaleNoLeader: every electd request asks "require leader"
// (requireleader.go), and etcd cancels such streams, with "no leader",
// once their member has been without a raft leader for three election
// timeouts (v3rpc monitorLeader). A kept renewal stream whose member lost
// its leader and found it again between two renewals is dead with that
// status, and the next renewal reads it: "no leader", from a member that
// has one. keeper.keepAlive retries a failed kept stream on a new one,
// but not after "no leader", and the renewal loop takes it for the
// member's refusal (refusedAtOnce) and leaves a healthy member. A stream
// per renewal was opened then, and the member, which has a leader again,
// renewed (this test passes with pin.keepAlive, a stream per call). The
// cost in the loop: a renewal moved off a healthy member, and one failure
// logged where the next member's last mark is stale (errUnproved there
// falls to the loop's default case).
//
// Asserted: once the member follows a raft leader again, a renewal through
// it on the kept stream succeeds.
func TestKeptStreamStaleNoLeader(t *testing.T) {
	c := testenv.StartEtcdCluster(t)
	x := (c.Leader(t) + 1) % 3 // a follower
	m := c.Members()[x]
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{m.Endpoint()}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), DialOptions: requireLeader(), // as Dial
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lease, err := c.Client(t).Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	p := firstPin(t, cli)
	k := keeper{parent: ctx}
	defer k.close()
	renew := func() error {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		defer rcancel()
		_, err := k.keepAlive(rctx, p, clientv3.LeaseID(lease.ID))
		return err
	}
	if err := renew(); err != nil {
		t.Fatalf("first renewal: %v", err)
	}

	// m_x loses its raft leader until etcd ends its require-leader
	// streams: a witness stream of the pin's, idle, tells when.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	witness, err := p.lease.LeaseKeepAlive(wctx)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := witness.Recv()
		ended <- err
	}()
	c.Partition(x)
	t.Cleanup(func() { c.Heal(x) })
	select {
	case err := <-ended:
		if !errors.Is(toErr(ctx, err), rpctypes.ErrNoLeader) {
			t.Fatalf("the witness stream ended with %v, want %v", err, rpctypes.ErrNoLeader)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("m%d did not end its streams within 20 s of its partition", x)
	}
	c.Heal(x)
	c.WaitHealthy(t) // m_x follows the raft leader again
	if err := renew(); err != nil {
		t.Fatalf("renewal through m%d, which follows a raft leader again: %v (refusedAtOnce: %v)", x, err, refusedAtOnce(err))
	}
}
