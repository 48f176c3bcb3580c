package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/supervisor"
	"github.com/electd/electd/test/kit"
)

// topologyWait bounds the harness's own waits on a topology's nodes
// (a snapshot to fail or succeed, a replica to follow the new master).
const topologyWait = 30 * time.Second

// misconfFile is the snapshot file a misconf fault points the master at: a
// non-empty directory of that name stands in its way, so that renaming the
// finished snapshot onto it fails (EISDIR) as a write to a full disk does.
// (Moving `dir` away instead would also move the cluster's nodes.conf,
// which a node rewrites at any time and dies when it cannot.)
const misconfFile = "torture-misconf.rdb"

// sentinel is the store's Sentinel topology (its own faults').
func (c *cluster) sentinel() *testenv.Sentinel { return topology[*testenv.Sentinel](c) }

// redisCluster is the store's Redis Cluster (its own faults').
func (c *cluster) redisCluster() *testenv.Cluster { return topology[*testenv.Cluster](c) }

// failedOver is a failover of the store's master, which note names: f
// starts when fail is called and the store is up when fail returns the new
// master, which the note then names with the time it took.
func failedOver(f *fault, note string, fail func() string) {
	f.note = note
	f.at = time.Now()
	now := fail()
	f.storeUp = time.Now()
	f.note += fmt.Sprintf(" → %s after %s", now, ms(f.storeUp.Sub(f.at)))
}

// injectTopology applies and heals one of the topology faults.
func (c *cluster) injectTopology(f *fault, rng *rand.Rand) {
	t := c.t
	f.target = ""
	switch f.kind {
	case masterKill:
		sen := c.sentinel()
		old := sen.Master(t)
		failedOver(f, "master "+old, func() string {
			sen.KillMaster(t)
			return sen.WaitFailover(t, old, topologyWait)
		})
		sen.Start(t) // the old master comes back, empty, as a replica of the new one
		f.healed = time.Now()

	case masterStop:
		sen := c.sentinel()
		old := sen.Master(t)
		n := c.dataNode(old)
		f.note = "master " + old
		f.at = time.Now()
		c.must(syscall.Kill(n.Pid(), syscall.SIGSTOP))
		now := sen.WaitFailover(t, old, topologyWait)
		// The sentinels reconfigure the other replica too; resuming the
		// old master before it follows the new one would give the old
		// master a replica to satisfy WAIT 1 with: the split brain the
		// Redis backend documents as not covered.
		c.awaitFollows(f, now, old)
		f.storeUp = time.Now()
		c.must(syscall.Kill(n.Pid(), syscall.SIGCONT))
		// It resumes as a master with its old data until the sentinels
		// demote it, which takes them up to about 20 s (a replica's INFO
		// period is 10 s, and they leave a returning master 8 s to
		// change its mind): longer than testenv waits for a healthy
		// topology, so the harness waits for the demotion first.
		c.awaitDemoted(f, n, now)
		sen.WaitHealthy(t)
		f.healed = time.Now()
		f.note += fmt.Sprintf(" → %s after %s, resumed, demoted after %s", now, ms(f.storeUp.Sub(f.at)), ms(f.healed.Sub(f.storeUp)))

	case plannedFailover:
		c.injectPlannedFailover(f, rng)

	case slotFailover:
		cl := c.redisCluster()
		old := cl.MasterOf(t, c.slot)
		failedOver(f, fmt.Sprintf("slot %d master %s", c.slot, old), func() string { return cl.Failover(t, c.slot).String() })
		cl.Start(t) // the killed node comes back, empty, as a replica of the new master
		f.healed = time.Now()

	case slotManual:
		cl := c.redisCluster()
		old := cl.MasterOf(t, c.slot)
		failedOver(f, fmt.Sprintf("slot %d master %s", c.slot, old), func() string { return cl.ManualFailover(t, c.slot).String() })
		f.healed = f.storeUp

	case reshard:
		cl := c.redisCluster()
		src := cl.MasterOf(t, c.slot)
		var others []*testenv.RedisNode
		for _, m := range cl.Masters(t) {
			if m != src {
				others = append(others, m)
			}
		}
		to, d := others[rng.IntN(len(others))], between(rng, c.cfg.ttl, 0.5, 1.5)
		f.note = fmt.Sprintf("slot %d %s → %s, paused %s mid-migration", c.slot, src, to, d)
		f.at = time.Now()
		cl.Reshard(t, c.slot, to, func() { time.Sleep(d) }) // the pause is the experiment; electd runs on
		f.storeUp = time.Now()
		f.healed = f.storeUp

	case misconf, oom:
		addr := c.masterAddr()
		cli := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer cli.Close()
		d := between(rng, c.cfg.ttl, 0.3, 0.8)
		f.note = fmt.Sprintf("master %s refused writes for %s", addr, d)
		inject, lift := c.injectOOM, c.liftOOM
		if f.kind == misconf {
			inject, lift = c.injectMISCONF, c.liftMISCONF
		}
		f.at = time.Now()
		inject(f, cli)
		time.Sleep(d) // the refusal's length is the experiment
		lift(f, cli)
		f.healed = time.Now()
		if startedAs[*testenv.Sentinel](c.s) {
			c.awaitSentinels(f, addr)
		}
	}
}

// injectPlannedFailover runs SENTINEL FAILOVER, on a sentinel drawn at
// random, while every full resync waits 1–2 s (repl-diskless-sync-delay,
// standing in for a large data set): the sentinels move the replicas to
// the promoted one one at a time (parallel-syncs 1, kit's topology), so
// the old master keeps a replica, which answers WAIT there, until the
// first one moved has synced and the sentinel has seen it, while the
// sentinels already name the promoted replica (issue 24). Healed once
// every replica follows the new master, the sentinels have demoted the
// old one and the topology is healthy.
func (c *cluster) injectPlannedFailover(f *fault, rng *rand.Rand) {
	t, sen := c.t, c.sentinel()
	old := sen.Master(t)
	delay := 1 + rng.IntN(2)
	c.setSyncDelay(old, delay)
	addrs := sen.SentinelAddrs()
	by := addrs[rng.IntN(len(addrs))]
	cli := redis.NewSentinelClient(&redis.Options{Addr: by, MaxRetries: -1})
	defer cli.Close()
	f.note = fmt.Sprintf("master %s, by sentinel %s, full resyncs after %d s", old, by, delay)
	f.at = time.Now()
	c.must(cli.Failover(context.Background(), sen.MasterName()).Err())
	now := sen.WaitFailover(t, old, topologyWait)
	f.storeUp = time.Now()
	left := c.replicasOf(old)
	c.awaitFollows(f, now, old)
	c.awaitDemoted(f, c.dataNode(old), now)
	c.setSyncDelay("", 0)
	sen.WaitHealthy(t)
	f.healed = time.Now()
	f.note += fmt.Sprintf(" → %s after %s, %s replica(s) still on the old master then; demoted after %s",
		now, ms(f.storeUp.Sub(f.at)), left, ms(f.healed.Sub(f.storeUp)))
}

// setSyncDelay sets repl-diskless-sync-delay (seconds) on every Sentinel
// data node but skip.
func (c *cluster) setSyncDelay(skip string, seconds int) {
	for _, n := range c.sentinel().Nodes() {
		if n.Addr() == skip {
			continue
		}
		cli := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		c.must(cli.ConfigSet(context.Background(), "repl-diskless-sync-delay", strconv.Itoa(seconds)).Err())
		_ = cli.Close()
	}
}

// replicasOf reads a data node's connected_slaves ("?" if it cannot).
func (c *cluster) replicasOf(addr string) string {
	cli := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cli.Close()
	info, err := infoFields(context.Background(), cli, "replication")
	if err != nil {
		return "?"
	}
	return info["connected_slaves"]
}

// keepBound is the longest refusal of writes (from inject to lift) after
// which the store is writable again before the term's stop-by time
// whatever the phase of its renewals: its last renewal acknowledged before
// the refusal was sent at most one renew interval earlier, and the
// supervisor starts stopping the child at ValidUntil − stop-timeout −
// StopMargin. A longer refusal may end the term by that rule (not by the
// errors); so may a shorter one when electd's next retry after the lift
// (a leader's backoff is capped at renew-interval/4) comes after stop-by.
func (c *cluster) keepBound() time.Duration {
	return c.cfg.window - c.cfg.stopTimeout - supervisor.StopMargin - c.cfg.renew
}

// awaitSentinels settles the sentinels after a refusal by master: a
// master that answers PING with MISCONF is not available to them, so one
// refusing for about down-after (2 s) from a sentinel's first unanswered
// PING may be failed over, and the fault is healed only once that cannot
// happen any more: every sentinel has had a good PING reply from master
// since the lift, with no failover under way; or, if they failed over, once
// the new master takes writes and the topology is healthy (f.storeUp).
func (c *cluster) awaitSentinels(f *fault, master string) {
	sen, lifted := c.sentinel(), time.Now()
	var clis []*redis.SentinelClient
	for _, a := range sen.SentinelAddrs() {
		cli := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1})
		defer cli.Close()
		clis = append(clis, cli)
	}
	moved := false
	c.poll(f, "the sentinels to see "+master+" answer again", func(ctx context.Context) error {
		for i, cli := range clis {
			m, err := cli.Master(ctx, sen.MasterName()).Result()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", sen.SentinelAddrs()[i], err)
			}
			if got := m["ip"] + ":" + m["port"]; got != master {
				moved = true
				return nil
			}
			ago, err := strconv.Atoi(m["last-ok-ping-reply"])
			if err != nil {
				return fmt.Errorf("sentinel %s: last-ok-ping-reply %q", sen.SentinelAddrs()[i], m["last-ok-ping-reply"])
			}
			if m["flags"] != "master" || time.Duration(ago)*time.Millisecond >= time.Since(lifted) {
				return fmt.Errorf("sentinel %s: flags %q, last good PING reply %d ms ago", sen.SentinelAddrs()[i], m["flags"], ago)
			}
		}
		return nil
	})
	if !moved {
		return
	}
	now := sen.WaitFailover(c.t, master, topologyWait)
	f.storeUp = time.Now()
	c.awaitDemoted(f, c.dataNode(master), now) // it answers again: the sentinels demote it
	sen.WaitHealthy(c.t)
	f.note += fmt.Sprintf("; the sentinels failed over to %s, %s after the fault", now, ms(f.storeUp.Sub(f.at)))
}

// masterAddr is the master the election's keys are on: the sentinels'
// master, or the master of the election's slot.
func (c *cluster) masterAddr() string {
	if sen, ok := kit.As[*testenv.Sentinel](c.s); ok {
		return sen.Master(c.t)
	}
	return c.redisCluster().MasterOf(c.t, c.slot).Addr()
}

// dataNode returns the Sentinel data node at addr.
func (c *cluster) dataNode(addr string) *testenv.RedisNode {
	i := slices.IndexFunc(c.sentinel().Nodes(), func(n *testenv.RedisNode) bool { return n.Addr() == addr })
	if i < 0 {
		c.t.Fatalf("torture: %s is not a data node", addr)
	}
	return c.sentinel().Nodes()[i]
}

// awaitFollows waits until every Sentinel data node other than master and
// old reports master as its master.
func (c *cluster) awaitFollows(f *fault, master, old string) {
	for _, n := range c.sentinel().Nodes() {
		if n.Addr() == master || n.Addr() == old {
			continue
		}
		cli := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		c.poll(f, n.Addr()+" to replicate "+master, func(ctx context.Context) error {
			info, err := infoFields(ctx, cli, "replication")
			if err != nil {
				return err
			}
			if got := info["master_host"] + ":" + info["master_port"]; got != master {
				return fmt.Errorf("its master is %s", got)
			}
			return nil
		})
		_ = cli.Close()
	}
}

// demoteWait bounds the wait for the sentinels to demote a master that
// resumed after a failover (seen: 20.1 s).
const demoteWait = 60 * time.Second

// awaitDemoted waits until n reports itself a replica of master.
func (c *cluster) awaitDemoted(f *fault, n *testenv.RedisNode, master string) {
	cli := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer cli.Close()
	c.pollFor(f, demoteWait, n.Addr()+" to be demoted to a replica of "+master, func(ctx context.Context) error {
		info, err := infoFields(ctx, cli, "replication")
		if err != nil {
			return err
		}
		if got := info["master_host"] + ":" + info["master_port"]; info["role"] != "slave" || got != master {
			return fmt.Errorf("role %s, master %s", info["role"], got)
		}
		return nil
	})
}

// injectMISCONF makes the master's snapshots fail, with writes refused
// while the last one failed (stop-writes-on-bgsave-error, which needs a
// save point), and waits until one has failed.
func (c *cluster) injectMISCONF(f *fault, cli *redis.Client) {
	ctx := context.Background()
	dir, err := cli.ConfigGet(ctx, "dir").Result()
	c.must(err)
	block := filepath.Join(dir["dir"], misconfFile)
	c.must(os.MkdirAll(filepath.Join(block, "in-the-way"), 0o755))
	for _, kv := range [][2]string{{"dbfilename", misconfFile}, {"save", "3600 1"}, {"stop-writes-on-bgsave-error", "yes"}} {
		c.must(cli.ConfigSet(ctx, kv[0], kv[1]).Err())
	}
	c.bgsave(f, cli, "err")
}

// liftMISCONF clears the way, waits for a snapshot that succeeds, and puts
// the settings back (no save point, no snapshot left for a restart to load).
func (c *cluster) liftMISCONF(f *fault, cli *redis.Client) {
	ctx := context.Background()
	dir, err := cli.ConfigGet(ctx, "dir").Result()
	c.must(err)
	block := filepath.Join(dir["dir"], misconfFile)
	c.must(os.RemoveAll(block))
	c.bgsave(f, cli, "ok")
	for _, kv := range [][2]string{{"save", ""}, {"dbfilename", "dump.rdb"}} {
		c.must(cli.ConfigSet(ctx, kv[0], kv[1]).Err())
	}
	c.must(os.RemoveAll(block))
}

// bgsave starts a snapshot (once none is in progress) and waits until it
// has ended with status want ("ok" or "err").
func (c *cluster) bgsave(f *fault, cli *redis.Client, want string) {
	started := false
	c.poll(f, "a snapshot to end "+want, func(ctx context.Context) error {
		info, err := infoFields(ctx, cli, "persistence")
		if err != nil {
			return err
		}
		if info["rdb_bgsave_in_progress"] != "0" {
			return fmt.Errorf("a snapshot is in progress")
		}
		if !started {
			if err := cli.BgSave(ctx).Err(); err != nil {
				return fmt.Errorf("bgsave: %w", err) // e.g. a replica's sync is running
			}
			started = true
			return fmt.Errorf("started")
		}
		if got := info["rdb_last_bgsave_status"]; got != want {
			return fmt.Errorf("last snapshot %s", got)
		}
		return nil
	})
}

// injectOOM sets the master's maxmemory below what it uses, with
// noeviction: every write is refused with OOM.
func (c *cluster) injectOOM(_ *fault, cli *redis.Client) {
	ctx := context.Background()
	c.must(cli.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	c.must(cli.ConfigSet(ctx, "maxmemory", "1").Err())
}

func (c *cluster) liftOOM(_ *fault, cli *redis.Client) {
	c.must(cli.ConfigSet(context.Background(), "maxmemory", "0").Err())
}

// poll calls check every settlePoll until it returns nil, and fails the
// run with its last error after topologyWait.
func (c *cluster) poll(f *fault, what string, check func(ctx context.Context) error) {
	c.t.Helper()
	c.pollFor(f, topologyWait, what, check)
}

// pollFor is poll with a deadline of within.
func (c *cluster) pollFor(f *fault, within time.Duration, what string, check func(ctx context.Context) error) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.fatalf(f, "waiting for %s: not within %s: %v", what, within, err)
		}
		time.Sleep(settlePoll) // polling a condition with a deadline
	}
}

// infoFields returns one INFO section of a server as key → value.
func infoFields(ctx context.Context, cli *redis.Client, section string) (map[string]string, error) {
	s, err := cli.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("info %s of %s: %w", section, cli.Options().Addr, err)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}
