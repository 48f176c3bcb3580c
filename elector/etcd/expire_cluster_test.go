package etcd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// Regression tests of the head waiter on the three-member cluster, written
// in the review of issue 22's change (readings pinned to one member, in
// one raft term, confirmed by a linearizable read through it).

// TestClusterHeadWaiterRevokesCutOffLeader is TestHeadWaiterRevokesCutOffLeader
// on the cluster: the leader a (dialing every member, each through a
// proxy of its own) is cut off; the head waiter b, dialing every member,
// must lead only after a's ValidUntil, and (liveness) should have proved
// the expiry and revoked the lease itself, within about what it takes on
// one member, in most trials. Logged: b's start against a's ValidUntil,
// whether b revoked, and how many lease readings b made.
func TestClusterHeadWaiterRevokesCutOffLeader(t *testing.T) {
	const ttl = 2 * time.Second
	c := testenv.StartEtcdCluster(t)
	ctx := context.Background()
	revokedBy := 0
	const trials = 3
	for trial := range trials {
		election := fmt.Sprintf("cluster-expire-cut-%d", trial)
		var proxies []*faultproxy.Proxy
		var hosts []string
		for _, ep := range c.Endpoints() {
			p := faultproxy.Start(t, ep)
			proxies = append(proxies, p)
			hosts = append(hosts, p.Addr())
		}
		// a dials every member, through its proxies.
		acli, err := clientv3.New(clientv3.Config{Endpoints: hosts, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = acli.Close() })
		a := newTestElector(t, acli, election, "a", ttl)
		bc := countedClient(t, c.Endpoints()...)
		b := newTestElector(t, bc.Client, election, "b", ttl)

		ta, err := a.Campaign(ctx)
		if err != nil {
			t.Fatalf("a: %v", err)
		}
		won := make(chan *elector.Term, 1)
		go func() {
			if term, err := b.Campaign(ctx); err == nil {
				won <- term
			}
		}()
		waitQueued(t, c, election, 2)
		// Let b's probe settle on a member (and a term) before the cut.
		from := bc.count(timeToLive)
		timer := time.NewTimer(ttl)
		<-timer.C
		for _, p := range proxies {
			p.Cut()
		}
		cut := time.Now()
		var tb *elector.Term
		select {
		case tb = <-won:
		case <-time.After(ttl + 15*time.Second):
			t.Fatalf("trial %d: b did not lead after a was cut off", trial)
		}
		<-ta.Done()
		if !ta.ValidUntil().Before(tb.Leader.Since) {
			t.Fatalf("trial %d: b led at cut+%s, before a's ValidUntil (cut+%s)", trial,
				tb.Leader.Since.Sub(cut).Round(time.Millisecond), ta.ValidUntil().Sub(cut).Round(time.Millisecond))
		}
		n := b.expired.Load()
		if n > 0 {
			revokedBy++
		}
		t.Logf("trial %d: b led %s after a's ValidUntil (cut+%s); b revoked a's lease itself: %d; b's lease readings: %d in all, %d since a settled",
			trial, tb.Leader.Since.Sub(ta.ValidUntil()).Round(time.Millisecond), ta.ValidUntil().Sub(cut).Round(time.Millisecond),
			n, bc.count(timeToLive), bc.count(timeToLive)-from)
		if err := tb.Resign(ctx); err != nil {
			t.Fatalf("b resign: %v", err)
		}
		for _, p := range proxies {
			p.Heal()
		}
	}
	if revokedBy == 0 {
		t.Errorf("in %d failovers on the cluster the head waiter never revoked the expired lease itself", trials)
	}
}

// TestClusterExpireSparesALiveLeaseAcrossRaftLeaderChanges renews a 2 s
// lease at irregular gaps of 1.1–1.95 s (as TestExpireNeverRevokesALiveLease
// does on one member), so that LeaseTimeToLive keeps answering 0, while
// raft leadership moves between the members every 0.4–1.4 s, and a head
// waiter's probe watches the lease through a member picked at random each
// time it starts (the probe is restarted every few seconds). Every renewal
// must succeed: a revocation of the live lease would answer "lease not
// found". The renewer renews through the raft leader's own member, so that
// each renewal lands on the lessor that counts; a new raft leader extends
// every lease (Promote), which the probe must read as a renewal.
func TestClusterExpireSparesALiveLeaseAcrossRaftLeaderChanges(t *testing.T) {
	c := testenv.StartEtcdCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cli := c.Client(t)
	bc := countedClient(t, c.Endpoints()...)
	b := newTestElector(t, bc.Client, "expire-moves", "b", 2*time.Second)

	g, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	key := "/expire-moves/leader"
	if _, err := cli.Put(ctx, key, "l", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	kv := leaderKey(ctx, t, cli, key)
	deleted := watchDeleted(ctx, t, cli, key, clientv3.WithRev(kv.ModRevision+1))

	// The head waiter's probe, restarted every 2–4 s (a new random member).
	pctx, pcancel := context.WithCancel(ctx)
	var probes sync.WaitGroup
	probes.Add(1)
	go func() {
		defer probes.Done()
		for pctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(pctx, 2*time.Second+rand.N(2*time.Second))
			b.expire(rctx, kv, value{ID: "l", Since: time.Now()})
			rcancel()
		}
	}()
	// Raft leadership moves all the while.
	movers := make([]*clientv3.Client, len(c.Members()))
	for i := range movers {
		movers[i] = c.Client(t, i)
	}
	var moves sync.WaitGroup
	moved := 0
	moves.Add(1)
	go func() {
		defer moves.Done()
		for pctx.Err() == nil {
			timer := time.NewTimer(400*time.Millisecond + rand.N(time.Second)) // the fault's schedule
			select {
			case <-timer.C:
			case <-pctx.Done():
				timer.Stop()
				return
			}
			from, err := raftLeader(pctx, c)
			if err != nil {
				continue
			}
			to := (from + 1 + rand.N(2)) % 3
			st, err := c.Status(pctx, to)
			if err != nil {
				continue
			}
			mctx, mcancel := context.WithTimeout(pctx, 5*time.Second)
			if _, err := movers[from].MoveLeader(mctx, st.Header.MemberId); err == nil {
				moved++
			}
			mcancel()
		}
	}()

	lastSent := time.Now()
	renewals := 0
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); {
		gap := 1100*time.Millisecond + rand.N(850*time.Millisecond)
		timer := time.NewTimer(gap) // the renewer's schedule, not synchronisation
		select {
		case <-timer.C:
		case at := <-deleted:
			t.Fatalf("the live lease was revoked at %s after its last renewal (waiter revocations: %d)", at.Sub(lastSent), b.expired.Load())
		}
		sent := time.Now()
		if _, err := cli.KeepAliveOnce(ctx, g.ID); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				t.Fatalf("renewal %s after the last: %v (the waiter revoked %d leases: a live lease)", sent.Sub(lastSent), err, b.expired.Load())
			}
			t.Logf("renewal %s after the last failed: %v", sent.Sub(lastSent), err)
			continue
		}
		lastSent = sent
		renewals++
	}
	pcancel()
	probes.Wait()
	moves.Wait()
	t.Logf("%d renewals at gaps of 1.1–1.95 s, %d raft leader moves, %d lease readings by the waiter; revocations: %d",
		renewals, moved, bc.count(timeToLive), b.expired.Load())
	if n := b.expired.Load(); n != 0 {
		t.Fatalf("the waiter revoked %d leases", n)
	}
}

// raftLeader is the index of the member the others follow.
func raftLeader(ctx context.Context, c *testenv.EtcdCluster) (int, error) {
	ids := map[uint64]int{}
	var lead uint64
	for i := range c.Members() {
		st, err := c.Status(ctx, i)
		if err != nil {
			return -1, err
		}
		ids[st.Header.MemberId] = i
		lead = st.Leader
	}
	i, ok := ids[lead]
	if !ok {
		return -1, fmt.Errorf("no leader")
	}
	return i, nil
}

// waitQueued waits until election has n keys.
func waitQueued(t *testing.T, c *testenv.EtcdCluster, election string, n int) {
	t.Helper()
	cli := c.Client(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cli.Get(ctx, DefaultPrefix+election+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil && int(resp.Count) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %d keys after 10 s (%v)", election, n, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}
