package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector/backend/hosts"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// TestLeaderlessMemberRefusesAtOnce partitions one member of a three-member
// cluster from its peers and, once it knows it has no leader, renews a
// lease through electd's client twelve times: the client balances over
// all three members, so some renewals reach the partitioned one. None may
// hang there until its timeout; those that reach it are refused at once
// with "no leader" (and electd retries on the next member). Without
// require-leader a third of them waited out the timeout.
func TestLeaderlessMemberRefusesAtOnce(t *testing.T) {
	c := testenv.StartEtcdCluster(t)
	cli := dialCluster(t, c)

	partitionFollower(t, c)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lease clientv3.LeaseID
	for lease == 0 { // the grant itself may reach the partitioned member
		resp, err := cli.Grant(ctx, 30)
		switch {
		case err == nil:
			lease = resp.ID
		case !refusedAtOnce(err):
			t.Fatalf("grant: %v", err)
		}
	}
	refused := 0
	for i := range 12 {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		start := time.Now()
		_, err := cli.KeepAliveOnce(rctx, lease)
		took := time.Since(start)
		rcancel()
		switch {
		case took > time.Second:
			t.Fatalf("renewal %d took %s (err %v): it waited at the partitioned member", i, took, err)
		case refusedAtOnce(err):
			refused++
		case err != nil:
			t.Fatalf("renewal %d: %v", i, err)
		}
	}
	if refused == 0 {
		t.Fatal("no renewal reached the partitioned member: the test shows nothing")
	}
	t.Logf("%d of 12 renewals reached the partitioned member and were refused at once", refused)
}

// dialCluster is electd's own client (Dial) of every member of c, closed
// when the test ends.
func dialCluster(t *testing.T, c *testenv.EtcdCluster) *clientv3.Client {
	t.Helper()
	bc, err := Dial(context.Background(), hosts.Endpoint{Scheme: "etcd", Hosts: c.Endpoints()})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = bc.Close() })
	return bc.(*conn).cli
}

// partitionFollower cuts a follower of c off from its peers until the test
// ends, waits until it knows it has no leader, and returns it.
func partitionFollower(t *testing.T, c *testenv.EtcdCluster) int {
	t.Helper()
	cut := (c.Leader(t) + 1) % len(c.Members()) // a follower
	c.Partition(cut)
	t.Cleanup(func() { c.Heal(cut) })
	electortest.Eventually(t, 10*time.Second, "the partitioned member to know it has no leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := c.Status(ctx, cut)
		return err == nil && st.Leader == 0
	})
	return cut
}
