package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electd/electd/internal/faultproxy"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestEtcdCluster(t *testing.T) {
	begin := time.Now()
	c := StartEtcdCluster(t)
	t.Logf("started and healthy in %v", time.Since(begin))
	if n := len(c.Endpoints()); n != 3 {
		t.Fatalf("Endpoints() has %d, want 3", n)
	}
	// One client per member alone, for serializable reads of its own copy.
	var own []*clientv3.Client
	for i := range c.Members() {
		own = append(own, c.Client(t, i))
	}
	put(t, c.Client(t), "k", "v1")
	for i := range own {
		waitLocal(t, own[i], i, "k", "v1")
	}

	t.Run("kill leader", func(t *testing.T) {
		old := c.Leader(t)
		m := c.Members()[old]
		pid := m.Pid()
		m.Kill(t)
		begin := time.Now()
		now := c.Leader(t)
		t.Logf("m%d killed: m%d leads after %v", old, now, time.Since(begin))
		if now == old {
			t.Fatalf("leader m%d was killed, and is still the leader", old)
		}
		put(t, c.Client(t, others(old)...), "k", "v2")

		begin = time.Now()
		m.Start(t)
		c.WaitHealthy(t)
		t.Logf("m%d restarted: follows again after %v", old, time.Since(begin))
		if m.Pid() == 0 || m.Pid() == pid {
			t.Fatalf("m%d: pid %d after Start, want a new one (was %d)", old, m.Pid(), pid)
		}
		waitLocal(t, own[old], old, "k", "v2")
	})

	t.Run("partition follower", func(t *testing.T) {
		leader := c.Leader(t)
		f := (leader + 1) % 3
		before := status(t, c, f)
		c.Partition(f)
		begin := time.Now()
		held := c.linkBytes(f)
		put(t, c.Client(t, others(f)...), "k", "v3")
		t.Logf("m%d partitioned: the others wrote in %v", f, time.Since(begin))
		// What etcd reports: the cut-off follower hears no heartbeat, its
		// election timer fires, it turns pre-candidate (pre-vote is on by
		// default) and forgets its leader, without raising its term, as
		// no pre-vote reaches a peer; its raft index stays behind.
		poll(t, fmt.Sprintf("m%d to notice it is partitioned", f), func(ctx context.Context) error {
			st, err := c.Status(ctx, f)
			if err != nil {
				return err
			}
			if st.Leader != 0 {
				return fmt.Errorf("m%d still follows %x", f, st.Leader)
			}
			return nil
		})
		t.Logf("m%d partitioned: reports no leader after %v", f, time.Since(begin))
		cut, lead := status(t, c, f), status(t, c, leader)
		if cut.RaftIndex >= lead.RaftIndex || cut.RaftTerm != before.RaftTerm {
			t.Fatalf("partitioned m%d: raft index %d, term %d (before: %d); leader's index %d: want a lagging index, the same term",
				f, cut.RaftIndex, cut.RaftTerm, before.RaftTerm, lead.RaftIndex)
		}
		expectLocal(t, own[f], f, "k", "v2") // it still serves its stale copy
		if now := c.linkBytes(f); now != held {
			t.Fatalf("m%d partitioned: its links delivered %d bytes, then %d", f, held, now)
		}

		c.Heal(f)
		begin = time.Now()
		if got := c.Leader(t); got != leader {
			t.Fatalf("after heal: leader m%d, want m%d (a pre-candidate disrupts nobody)", got, leader)
		}
		waitLocal(t, own[f], f, "k", "v3")
		t.Logf("m%d healed: follows and has caught up after %v", f, time.Since(begin))
	})

	t.Run("slow leader", func(t *testing.T) {
		const delay = 150 * time.Millisecond // well below the election timeout
		leader := c.Leader(t)
		c.SetPeerDelay(leader, delay)
		// A write commits once a follower has the leader's entry and the
		// leader its acknowledgement: two delayed crossings at least.
		begin := time.Now()
		put(t, c.Client(t, leader), "slow", "1")
		slow := time.Since(begin)
		c.SetPeerDelay(leader, 0)
		begin = time.Now()
		put(t, c.Client(t, leader), "slow", "2")
		t.Logf("m%d's peer links delayed %v each way: a write took %v; %v once the delay ended", leader, delay, slow, time.Since(begin))
		if slow < 2*delay {
			t.Fatalf("a write through the slowed leader m%d took %v, less than two crossings of %v", leader, slow, delay)
		}
		c.WaitHealthy(t)
	})

	t.Run("restart all", func(t *testing.T) {
		c.Kill(t)
		for i, m := range c.Members() {
			if m.Pid() != 0 {
				t.Fatalf("m%d: pid %d after Kill, want 0", i, m.Pid())
			}
		}
		begin := time.Now()
		c.Start(t)
		t.Logf("restarted all: healthy after %v", time.Since(begin))
		for i := range own {
			waitLocal(t, own[i], i, "k", "v3")
		}
		put(t, c.Client(t), "k", "v4")
	})

	for i, m := range c.Members() {
		if n := m.front.strangers.Load(); n != 0 {
			t.Errorf("m%d's front refused %d connections it could not tell the dialer of", i, n)
		}
	}
}

// linkBytes returns how many bytes the links to and from member i have
// delivered.
func (c *EtcdCluster) linkBytes(i int) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for j := range 3 {
		if j != i {
			for _, p := range []*faultproxy.Proxy{c.links[i][j], c.links[j][i]} {
				st := p.Stats()
				n += st.BytesUp + st.BytesDown
			}
		}
	}
	return n
}

// others returns the indexes of the members other than i.
func others(i int) []int {
	var out []int
	for j := range 3 {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

func status(t *testing.T, c *EtcdCluster, i int) *clientv3.StatusResponse {
	t.Helper()
	st, err := c.Status(context.Background(), i)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func put(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, value); err != nil {
		t.Fatalf("put %s=%s: %v", key, value, err)
	}
}

// expectLocal reads key serializably through cli, a client of member i
// alone: from the member's own copy, without asking the leader.
func expectLocal(t *testing.T, cli *clientv3.Client, i int, key, want string) {
	t.Helper()
	if err := local(context.Background(), cli, i, key, want); err != nil {
		t.Fatal(err)
	}
}

// waitLocal waits until member i's own copy has key = want.
func waitLocal(t *testing.T, cli *clientv3.Client, i int, key, want string) {
	t.Helper()
	poll(t, fmt.Sprintf("m%d to have %s=%s", i, key, want), func(ctx context.Context) error {
		return local(ctx, cli, i, key, want)
	})
}

func local(ctx context.Context, cli *clientv3.Client, i int, key, want string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, key, clientv3.WithSerializable())
	if err != nil {
		return fmt.Errorf("m%d: get %s: %w", i, key, err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
		return fmt.Errorf("m%d: get %s = %v, want %q", i, key, resp.Kvs, want)
	}
	return nil
}

func poll(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	waitUntil(t, 15*time.Second, what, check)
}
