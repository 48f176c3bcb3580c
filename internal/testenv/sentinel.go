package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel's timing, in milliseconds (sentinel.conf).
const (
	// sentinelDownAfter: a master unanswered this long is subjectively
	// down. At +switch-master a sentinel resets the new master's link and
	// starts this clock (act_ping_time = now in sentinelResetMaster), but
	// it reconnects at most once a second (its ping period): with 1000,
	// two runs in eight saw a sentinel flag the new master down about 1 s
	// after switching and fail over again, to the old master restarted
	// empty. 2000 leaves a ping period of slack.
	sentinelDownAfter = 2000
	// sentinelFailoverTimeout: a failover that stalls is retried after twice
	// this; it also bounds the reconfiguration of the other replicas.
	sentinelFailoverTimeout = 3000
	sentinelQuorum          = 2
	sentinelMasterName      = "testenv-master"
	// sentinelProbeKey is the key WaitFailover writes (with a 1 s expiry)
	// to prove that the new master accepts writes.
	sentinelProbeKey = "testenv:failover-probe"
)

// Sentinel is a Redis Sentinel topology run as child processes: three data
// nodes (one master, two replicas, --replicaof; StartRedisSentinelWith
// sets how many replicas) and three sentinels
// monitoring the master with quorum 2, all on free loopback ports, without
// persistence. Every process is a RedisNode that can be killed and started
// on its own; all are killed in t.Cleanup.
//
// A data node that starts again comes back EMPTY, as a replica of the
// master the sentinels report at that moment (--replicaof), or without
// --replicaof if it is that master itself; so an old master restarted after
// a failover rejoins as a replica of the new one, and the sentinels never
// see two masters. Start it after WaitFailover: started before, it is still
// the sentinels' master and comes back as an empty master.
//
// WaitFailover writes testenv:failover-probe (expiring in 1 s) to the new
// master; testenv writes no other key.
//
// A sentinel that starts again reads the configuration it rewrote (its id,
// the current master, the replicas and sentinels it knows), so it keeps what
// it learned.
type Sentinel struct {
	opts      SentinelOptions
	nodes     []*RedisNode // data nodes; nodes[0] is the first master
	sentinels []*RedisNode
	scli      []*redis.SentinelClient

	mu   sync.Mutex
	last string // the master the sentinels last reported (nodes[0] at first)
}

// StartRedisSentinel starts the topology and waits until every sentinel
// knows the master, every replica and the two other sentinels, and every
// replica's link to the master is up. A missing redis-server skips the test
// (fails it when $CI is set).
func StartRedisSentinel(t testing.TB) *Sentinel {
	t.Helper()
	return StartRedisSentinelWith(t, SentinelOptions{})
}

// SentinelOptions shape a Sentinel topology; the zero value is
// StartRedisSentinel's.
type SentinelOptions struct {
	// Replicas is the number of replicas of the first master (default 2).
	Replicas int
	// ParallelSyncs is the sentinels' parallel-syncs: how many replicas
	// a failover moves to the promoted one at a time (default 2).
	ParallelSyncs int
}

func (o SentinelOptions) withDefaults() SentinelOptions {
	if o.Replicas <= 0 {
		o.Replicas = 2
	}
	if o.ParallelSyncs <= 0 {
		o.ParallelSyncs = 2
	}
	return o
}

// StartRedisSentinelWith is StartRedisSentinel with o's shape: one master,
// o.Replicas replicas, three sentinels with parallel-syncs o.ParallelSyncs.
func StartRedisSentinelWith(t testing.TB, o SentinelOptions) *Sentinel {
	t.Helper()
	bin := binary(t, "ELECTD_REDIS_SERVER", "redis-server", nil, redisHow)
	dir := t.TempDir()
	s := &Sentinel{opts: o.withDefaults()}
	for i := range s.opts.Replicas + 1 {
		n := newRedisNode(t, bin, filepath.Join(dir, fmt.Sprintf("data%d", i+1)), fmt.Sprintf("redis-server data%d", i+1))
		n.extra = func() []string { return s.replicaOf(n) }
		firstStartNode(t, n, false, nil)
		s.nodes = append(s.nodes, n)
		if i == 0 {
			s.last = n.Addr()
		}
	}
	for i := range 3 {
		n := newRedisNode(t, bin, filepath.Join(dir, fmt.Sprintf("sentinel%d", i+1)), fmt.Sprintf("redis-sentinel %d", i+1))
		conf := filepath.Join(n.dir, "sentinel.conf")
		n.extra = func() []string { return []string{"--sentinel"} }
		n.srv.args = func() []string { return append([]string{conf}, n.args()...) }
		// Written once: a sentinel rewrites it with what it learns, and
		// reads that back when it starts again.
		firstStartNode(t, n, false, func() error { return s.writeConf(conf) })
		s.sentinels = append(s.sentinels, n)
		cli := redis.NewSentinelClient(&redis.Options{
			Addr: n.Addr(), DialTimeout: probeTimeout, ReadTimeout: probeTimeout,
			WriteTimeout: probeTimeout, MaxRetries: -1, PoolSize: 2,
		})
		t.Cleanup(func() { _ = cli.Close() }) // only pooled connections to close
		s.scli = append(s.scli, cli)
	}
	s.waitHealthy(t)
	return s
}

func (s *Sentinel) writeConf(path string) error {
	conf := fmt.Sprintf("sentinel monitor %[1]s %[2]s %[3]d\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\n"+
		"sentinel failover-timeout %[1]s %[5]d\n"+
		"sentinel parallel-syncs %[1]s %[6]d\n",
		sentinelMasterName, strings.Replace(s.nodes[0].Addr(), ":", " ", 1), sentinelQuorum,
		sentinelDownAfter, sentinelFailoverTimeout, s.opts.ParallelSyncs)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("write sentinel config: %w", err)
	}
	return nil
}

// MasterName is the name the sentinels monitor the master under.
func (s *Sentinel) MasterName() string { return sentinelMasterName }

// SentinelAddrs returns the sentinels' addresses, "127.0.0.1:PORT".
func (s *Sentinel) SentinelAddrs() []string {
	var out []string
	for _, n := range s.sentinels {
		out = append(out, n.Addr())
	}
	return out
}

// URL returns electd's --store URL of the topology:
// redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/MASTERNAME.
func (s *Sentinel) URL() string {
	return "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + sentinelMasterName
}

// Nodes returns the data nodes, in the order they were first started
// (Nodes()[0] was the first master).
func (s *Sentinel) Nodes() []*RedisNode { return s.nodes }

// Sentinels returns the three sentinels.
func (s *Sentinel) Sentinels() []*RedisNode { return s.sentinels }

// Client returns a go-redis failover client (redis.NewFailoverClient) of
// the current master, closed in t.Cleanup.
func (s *Sentinel) Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	cli := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: sentinelMasterName, SentinelAddrs: s.SentinelAddrs(),
	})
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Master returns the master's address as most sentinels report it
// (SENTINEL get-master-addr-by-name).
func (s *Sentinel) Master(t testing.TB) string {
	t.Helper()
	addr, _, err := s.reported()
	if err != nil {
		t.Fatalf("testenv: sentinel master: %v", err)
	}
	return addr
}

// KillMaster SIGKILLs the data node the sentinels report as master and
// returns it.
func (s *Sentinel) KillMaster(t testing.TB) *RedisNode {
	t.Helper()
	n := s.node(t, s.Master(t))
	n.Kill(t)
	return n
}

// WaitFailover waits up to timeout until a quorum of sentinels report a
// master other than old, and that node answers ROLE as master and accepts a
// write (of testenv:failover-probe, expiring in 1 s). It returns the new
// master's address.
func (s *Sentinel) WaitFailover(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	var addr string
	waitUntil(t, timeout, "sentinel failover from "+old, func(ctx context.Context) error {
		got, votes, err := s.reported()
		if err != nil {
			return err
		}
		if got == old || votes < sentinelQuorum {
			return fmt.Errorf("%d sentinels report master %s", votes, got)
		}
		n := s.nodeAt(got)
		if n == nil {
			return fmt.Errorf("sentinels report %s, not a data node of ours", got)
		}
		if err := isMaster(ctx, n); err != nil {
			return err
		}
		if err := n.admin.Set(ctx, sentinelProbeKey, "1", time.Second).Err(); err != nil {
			return fmt.Errorf("write to new master %s: %w", got, err)
		}
		addr = got
		return nil
	})
	return addr
}

// Kill SIGKILLs every data node (replicas first, so that no sentinel can
// promote one meanwhile); the sentinels stay up.
func (s *Sentinel) Kill(t testing.TB) {
	t.Helper()
	master := s.lastMaster()
	for _, n := range s.nodes {
		if n.Addr() != master {
			n.Kill(t)
		}
	}
	for _, n := range s.nodes {
		n.Kill(t)
	}
}

// Start starts every data node that is not running, EMPTY: the sentinels'
// master first, the replicas once every sentinel has seen it up; then it
// waits until the topology is healthy again (as after StartRedisSentinel). The master stays the one the sentinels last
// reported, so after a failover it is not Nodes()[0].
func (s *Sentinel) Start(t testing.TB) {
	t.Helper()
	master := s.node(t, s.Master(t))
	if master.Pid() == 0 {
		since := time.Now()
		master.Start(t)
		// A sentinel counts down-after from its last PING reply, not from
		// the kill, so it may flag the master down even after a short
		// outage; were a replica up by then, it would promote it over the
		// master just restarted. So the replicas start once every sentinel
		// had a PING reply from this run of the master.
		waitUntil(t, topologyTimeout, "sentinels see master "+master.Addr()+" up", func(ctx context.Context) error {
			return s.seenSince(ctx, master, since)
		})
	}
	for _, n := range s.nodes {
		if n.Pid() == 0 {
			n.Start(t)
		}
	}
	s.waitHealthy(t)
}

// seenSince checks that every sentinel reports master up, with a PING reply
// received after since.
func (s *Sentinel) seenSince(ctx context.Context, master *RedisNode, since time.Time) error {
	for i, cli := range s.scli {
		m, err := cli.Master(ctx, sentinelMasterName).Result()
		if err != nil {
			return fmt.Errorf("sentinel %s: master: %w", s.sentinels[i], err)
		}
		ago, err := strconv.Atoi(m["last-ok-ping-reply"])
		if err != nil {
			return fmt.Errorf("sentinel %s: last-ok-ping-reply %q: %w", s.sentinels[i], m["last-ok-ping-reply"], err)
		}
		addr := net.JoinHostPort(m["ip"], m["port"])
		if addr != master.Addr() || m["flags"] != "master" || time.Duration(ago)*time.Millisecond >= time.Since(since) {
			return fmt.Errorf("sentinel %s: master %s flags %q, last ping reply %d ms ago", s.sentinels[i], addr, m["flags"], ago)
		}
	}
	return nil
}

// WaitHealthy waits until every sentinel reports the same master, flagged
// up, with every other data node as a replica whose link is up, and knows
// the two other sentinels; and every replica reports master_link_status:up.
func (s *Sentinel) WaitHealthy(t testing.TB) { t.Helper(); s.waitHealthy(t) }

func (s *Sentinel) waitHealthy(t testing.TB) {
	t.Helper()
	waitUntil(t, topologyTimeout, "sentinel topology healthy", s.healthy)
}

func (s *Sentinel) healthy(ctx context.Context) error {
	master, votes, err := s.reported()
	if err != nil {
		return err
	}
	if votes != len(s.sentinels) {
		return fmt.Errorf("only %d sentinels report master %s", votes, master)
	}
	for i, cli := range s.scli {
		m, err := cli.Master(ctx, sentinelMasterName).Result()
		if err != nil {
			return fmt.Errorf("sentinel %s: master: %w", s.sentinels[i], err)
		}
		if m["flags"] != "master" || m["num-other-sentinels"] != "2" {
			return fmt.Errorf("sentinel %s: master flags %q, %s other sentinels", s.sentinels[i], m["flags"], m["num-other-sentinels"])
		}
		reps, err := cli.Replicas(ctx, sentinelMasterName).Result()
		if err != nil {
			return fmt.Errorf("sentinel %s: replicas: %w", s.sentinels[i], err)
		}
		ok := 0
		for _, r := range reps {
			if r["flags"] == "slave" && r["master-link-status"] == "ok" {
				ok++
			}
		}
		if ok != len(s.nodes)-1 {
			return fmt.Errorf("sentinel %s: %d healthy replicas of %d", s.sentinels[i], ok, len(reps))
		}
	}
	for _, n := range s.nodes {
		if n.Addr() == master {
			continue
		}
		info, err := n.info(ctx, "replication")
		if err != nil {
			return err
		}
		if got := net.JoinHostPort(info["master_host"], info["master_port"]); got != master || info["master_link_status"] != "up" {
			return fmt.Errorf("replica %s: master %s, link %q", n, got, info["master_link_status"])
		}
	}
	return nil
}

// reported returns the master address most answering sentinels report, and
// how many report it; it remembers it for replicaOf.
func (s *Sentinel) reported() (string, int, error) {
	votes := map[string]int{}
	var errs []error
	for i, cli := range s.scli {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		hp, err := cli.GetMasterAddrByName(ctx, sentinelMasterName).Result()
		cancel()
		if err != nil || len(hp) != 2 {
			errs = append(errs, fmt.Errorf("sentinel %s: get-master-addr-by-name: %q, %w", s.sentinels[i], hp, err))
			continue
		}
		votes[net.JoinHostPort(hp[0], hp[1])]++
	}
	best, n := "", 0
	for addr, v := range votes {
		if v > n {
			best, n = addr, v
		}
	}
	if n == 0 {
		return "", 0, errors.Join(errs...)
	}
	s.mu.Lock()
	s.last = best
	s.mu.Unlock()
	return best, n, nil
}

func (s *Sentinel) lastMaster() string {
	if len(s.scli) > 0 {
		_, _, _ = s.reported() // on failure, the last answer stands
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// replicaOf is a data node's role arguments at its start: none for the
// master the sentinels report, else --replicaof that master.
func (s *Sentinel) replicaOf(n *RedisNode) []string {
	master := s.lastMaster()
	if master == "" || master == n.Addr() {
		return nil
	}
	host, port, _ := net.SplitHostPort(master) // from net.JoinHostPort
	return []string{"--replicaof", host, port}
}

// nodeAt returns the data node listening on addr, or nil.
func (s *Sentinel) nodeAt(addr string) *RedisNode {
	for _, n := range s.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

func (s *Sentinel) node(t testing.TB, addr string) *RedisNode {
	t.Helper()
	n := s.nodeAt(addr)
	if n == nil {
		t.Fatalf("testenv: sentinels report master %s, not a data node of ours", addr)
	}
	return n
}

// isMaster checks that n answers ROLE as a master.
func isMaster(ctx context.Context, n *RedisNode) error {
	role, err := n.admin.Do(ctx, "ROLE").Slice()
	if err != nil {
		return fmt.Errorf("role of %s: %w", n, err)
	}
	if len(role) == 0 || role[0] != "master" {
		return fmt.Errorf("role of %s: %v, want master", n, role)
	}
	return nil
}
