package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterNodeTimeout (ms) is cluster-node-timeout: a master unreachable
	// this long is failed by its peers and a replica takes over. Lower
	// values make failovers faster but let a loaded 2-core machine flap.
	clusterNodeTimeout = 1000
	clusterSlots       = 16384
	clusterMigrateKeys = 100 // keys per MIGRATE in Reshard
)

// Cluster is a Redis Cluster of six nodes run as child processes: three
// masters with one replica each (redis-cli --cluster create
// --cluster-replicas 1), on free loopback ports (client port and a cluster
// bus port each), without persistence of data. Every node is a RedisNode
// that can be killed and started on its own; all are killed in t.Cleanup.
//
// A node that starts again keeps its nodes.conf (its id, the slot map and
// epochs it knew) but comes back with EMPTY data: a replica resyncs from
// its master; a master that was failed over in the meantime learns the
// newer epoch and rejoins as a replica of the node that took its slots. So
// after a full Kill and Start the cluster has the same slot map, empty.
//
// Failover, ManualFailover and Reshard prove the slot's new master with a
// write of testenv:probe:{TAG} (a key of that slot, expiring in 1 s).
type Cluster struct {
	nodes []*RedisNode
}

// StartRedisCluster starts the six nodes, creates the cluster with
// redis-cli ($ELECTD_REDIS_CLI, else redis-cli in PATH) and waits until
// every node reports cluster_state:ok, all agree on the slot map and every
// replica's link to its master is up. A missing redis-server or redis-cli
// skips the test (fails it when $CI is set).
func StartRedisCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := binary(t, "ELECTD_REDIS_SERVER", "redis-server", nil, redisHow)
	cliBin := binary(t, "ELECTD_REDIS_CLI", "redis-cli", nil, redisHow)
	dir := t.TempDir()
	c := &Cluster{}
	for i := range 6 {
		n := newRedisNode(t, bin, filepath.Join(dir, fmt.Sprintf("node%d", i+1)), fmt.Sprintf("redis-server cluster node%d", i+1))
		n.extra = func() []string {
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf", // in --dir
				"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
				"--cluster-port", strconv.Itoa(n.busPort),
			}
		}
		firstStartNode(t, n, true, nil)
		c.nodes = append(c.nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	logPath := filepath.Join(dir, "redis-cli.log")
	p, err := startProc(cliBin, args, logPath)
	if err != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v", err)
	}
	if err := p.wait(topologyTimeout); err != nil {
		_ = p.kill() // the wait's error says enough
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, logTail(logPath, tailLines))
	}
	if p.Err() != nil {
		t.Fatalf("testenv: redis-cli --cluster create: %v\n%s", p.Err(), logTail(logPath, tailLines))
	}
	c.waitHealthy(t)
	return c
}

// Addrs returns the six nodes' addresses, "127.0.0.1:PORT".
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.Addr())
	}
	return out
}

// URL returns electd's --store URL of the cluster with all six nodes
// (masters and replicas: roles change with failovers, and a client needs
// one live node to learn the rest): redis+cluster://127.0.0.1:P1,…,127.0.0.1:P6.
func (c *Cluster) URL() string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") }

// Nodes returns the six nodes, in the order given to redis-cli.
func (c *Cluster) Nodes() []*RedisNode { return c.nodes }

// Client returns a go-redis cluster client of all six nodes, closed in
// t.Cleanup.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cli := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// MasterOf returns the master that owns slot, as the first running node
// sees the slot map.
func (c *Cluster) MasterOf(t testing.TB, slot int) *RedisNode {
	t.Helper()
	r := c.rangeOf(t, slot)
	return c.node(t, r.master)
}

// Masters returns the nodes that own slots, by their first slot, as the
// first running node sees the slot map.
func (c *Cluster) Masters(t testing.TB) []*RedisNode {
	t.Helper()
	var out []*RedisNode
	for _, r := range c.slotMap(t) {
		if n := c.node(t, r.master); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// ReplicasOf returns the replicas of the master that owns slot (not those
// in a failed state), as the first running node sees the slot map.
func (c *Cluster) ReplicasOf(t testing.TB, slot int) []*RedisNode {
	t.Helper()
	var out []*RedisNode
	for _, a := range c.rangeOf(t, slot).replicas {
		out = append(out, c.node(t, a))
	}
	return out
}

// Failover SIGKILLs the master that owns slot and waits until one of its
// replicas owns the slot, every running node agrees (see WaitHealthy) and
// a write to a key of the slot on the new master succeeds. It returns the
// new master; the killed node comes back, as its replica, with Start.
func (c *Cluster) Failover(t testing.TB, slot int) *RedisNode {
	t.Helper()
	old, reps := c.MasterOf(t, slot), c.ReplicasOf(t, slot)
	if len(reps) == 0 {
		t.Fatalf("testenv: failover of slot %d: master %s has no replica", slot, old)
	}
	old.Kill(t)
	return c.waitOwner(t, slot, reps)
}

// ManualFailover sends CLUSTER FAILOVER to a replica of the master that
// owns slot (a coordinated handover, no data lost) and waits as Failover
// does. It returns the new master; the old one is now its replica.
func (c *Cluster) ManualFailover(t testing.TB, slot int) *RedisNode {
	t.Helper()
	reps := c.ReplicasOf(t, slot)
	if len(reps) == 0 {
		t.Fatalf("testenv: manual failover of slot %d: its master has no replica", slot)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if err := reps[0].admin.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		t.Fatalf("testenv: cluster failover on %s: %v", reps[0], err)
	}
	return c.waitOwner(t, slot, reps[:1])
}

// waitOwner waits until one of want owns slot, the cluster is healthy, and
// that node accepts a write to a key of the slot.
func (c *Cluster) waitOwner(t testing.TB, slot int, want []*RedisNode) *RedisNode {
	t.Helper()
	var owner *RedisNode
	key := keyInSlot(slot)
	waitUntil(t, topologyTimeout, fmt.Sprintf("slot %d owned by one of %v", slot, want), func(ctx context.Context) error {
		if err := c.healthy(ctx); err != nil {
			return err
		}
		view, err := c.view(ctx, running(c.nodes)[0])
		if err != nil {
			return err
		}
		r := view.rangeOf(slot)
		i := slices.IndexFunc(want, func(n *RedisNode) bool { return n.Addr() == r.master })
		if i < 0 {
			return fmt.Errorf("slot %d is on %s", slot, r.master)
		}
		if err := want[i].admin.Set(ctx, key, "1", time.Second).Err(); err != nil {
			return fmt.Errorf("write %s on %s: %w", key, want[i], err)
		}
		owner = want[i]
		return nil
	})
	return owner
}

// Kill SIGKILLs every node.
func (c *Cluster) Kill(t testing.TB) {
	t.Helper()
	killEach(t, c.nodes)
}

// Start starts every node that is not running, on its nodes.conf and with
// EMPTY data, and waits until the cluster is healthy (see WaitHealthy).
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	startStopped(t, c.nodes)
	c.waitHealthy(t)
}

// WaitHealthy waits until every running node reports cluster_state:ok, all
// report the same slot map (masters and replicas), every running node is in
// it, and every running replica's link to its master is up.
func (c *Cluster) WaitHealthy(t testing.TB) { t.Helper(); c.waitHealthy(t) }

func (c *Cluster) waitHealthy(t testing.TB) {
	t.Helper()
	waitUntil(t, topologyTimeout, "redis cluster healthy", c.healthy)
}

func (c *Cluster) healthy(ctx context.Context) error {
	live := running(c.nodes)
	if len(live) == 0 {
		return fmt.Errorf("no node running")
	}
	var first slotMap
	for i, n := range live {
		s, err := n.admin.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("cluster info of %s: %w", n, err)
		}
		if st := infoFields(s)["cluster_state"]; st != "ok" {
			return fmt.Errorf("%s: cluster_state %q", n, st)
		}
		view, err := c.view(ctx, n)
		if err != nil {
			return err
		}
		if i == 0 {
			first = view
		} else if !slices.EqualFunc(view, first, slotRange.equal) {
			return fmt.Errorf("slot maps differ: %s sees %v, %s sees %v", live[0], first, n, view)
		}
		repl, err := n.info(ctx, "replication")
		if err != nil {
			return err
		}
		if repl["role"] == "slave" && repl["master_link_status"] != "up" {
			return fmt.Errorf("replica %s: master link %q", n, repl["master_link_status"])
		}
	}
	for _, n := range live {
		if !first.has(n.Addr()) {
			return fmt.Errorf("%s is not in the slot map %v", n, first)
		}
	}
	return nil
}

// Reshard moves slot, with its keys, from its master to the master to,
// with the protocol redis-cli uses: CLUSTER SETSLOT IMPORTING on to and
// MIGRATING on the source, CLUSTER GETKEYSINSLOT and MIGRATE … KEYS in
// batches, then CLUSTER SETSLOT NODE on to, the source and the other
// masters; it waits until the cluster is healthy with the slot on to.
//
// pause, if not nil, runs once about half the slot's keys have moved: the
// slot is then MIGRATING on the source and IMPORTING on to, so the source
// still answers for the keys it holds and answers -ASK for the others (and
// for new ones), which a cluster client must follow to to with ASKING.
// With no key in the slot, pause runs before any is moved.
func (c *Cluster) Reshard(t testing.TB, slot int, to *RedisNode, pause func()) {
	t.Helper()
	src := c.MasterOf(t, slot)
	if src == to {
		t.Fatalf("testenv: reshard slot %d: %s owns it already", slot, to)
	}
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	do := func(n *RedisNode, args ...any) *redis.Cmd {
		cmd := n.admin.Do(ctx, args...)
		if err := cmd.Err(); err != nil {
			t.Fatalf("testenv: reshard slot %d: %v on %s: %v", slot, args, n, err)
		}
		return cmd
	}
	srcID, toID := do(src, "CLUSTER", "MYID").Val(), do(to, "CLUSTER", "MYID").Val()
	do(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	do(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	total, err := do(src, "CLUSTER", "COUNTKEYSINSLOT", slot).Int()
	if err != nil {
		t.Fatalf("testenv: reshard slot %d: count keys: %v", slot, err)
	}
	migrate := func(limit int) {
		for moved := 0; moved < limit; {
			keys, err := do(src, "CLUSTER", "GETKEYSINSLOT", slot, min(clusterMigrateKeys, limit-moved)).StringSlice()
			if err != nil {
				t.Fatalf("testenv: reshard slot %d: keys: %v", slot, err)
			}
			if len(keys) == 0 {
				return
			}
			host, port := "127.0.0.1", strconv.Itoa(to.port)
			args := []any{"MIGRATE", host, port, "", 0, int(topologyTimeout / time.Millisecond), "KEYS"}
			for _, k := range keys {
				args = append(args, k)
			}
			do(src, args...)
			moved += len(keys)
		}
	}
	migrate(total / 2)
	if pause != nil {
		pause()
	}
	migrate(clusterSlots * clusterMigrateKeys) // the rest, however many
	do(to, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	do(src, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	for _, n := range running(c.nodes) {
		if n == to || n == src {
			continue
		}
		if role, err := n.info(ctx, "replication"); err == nil && role["role"] == "master" {
			do(n, "CLUSTER", "SETSLOT", slot, "NODE", toID)
		}
	}
	c.waitOwner(t, slot, []*RedisNode{to})
}

// rangeOf returns the range of slot as the first running node sees it.
func (c *Cluster) rangeOf(t testing.TB, slot int) slotRange {
	t.Helper()
	if slot < 0 || slot >= clusterSlots {
		t.Fatalf("testenv: slot %d: not in 0…%d", slot, clusterSlots-1)
	}
	return c.slotMap(t).rangeOf(slot)
}

// slotMap returns the slot map as the first running node sees it.
func (c *Cluster) slotMap(t testing.TB) slotMap {
	t.Helper()
	live := running(c.nodes)
	if len(live) == 0 {
		t.Fatal("testenv: no cluster node running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	view, err := c.view(ctx, live[0])
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return view
}

func (c *Cluster) node(t testing.TB, addr string) *RedisNode {
	t.Helper()
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	t.Fatalf("testenv: %s is not a node of this cluster", addr)
	return nil
}
