package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// topologyTimeout bounds every wait of a Sentinel or Cluster topology for
// its nodes to agree: start, full restart, failover, resharding.
const topologyTimeout = 30 * time.Second

// RedisNode is one redis-server of a Sentinel or Cluster topology: a data
// node or a sentinel. Kill, Stop and Start (from lifecycle) act on this one
// process; Start brings it back on the same port(s) with EMPTY data. What
// else a restart keeps (its role, the cluster's nodes.conf, a sentinel's
// rewritten configuration) is its topology's to say.
type RedisNode struct {
	lifecycle
	dir     string
	port    int
	busPort int             // cluster bus (cluster-port); 0 outside a Cluster
	extra   func() []string // role arguments, evaluated at each start
	admin   *redis.Client   // testenv's own connection, for its waits
}

// Addr returns the node's address, "127.0.0.1:PORT".
func (n *RedisNode) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// String is the node's address, for messages.
func (n *RedisNode) String() string { return n.Addr() }

// newRedisNode prepares a node in dir (created); firstStartNode starts it.
// Its server is killed, and its admin client closed, in t.Cleanup.
func newRedisNode(t testing.TB, bin, dir, name string) *RedisNode {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	n := &RedisNode{dir: dir}
	n.srv = &server{
		name:    name,
		bin:     bin,
		logPath: filepath.Join(dir, "redis.log"),
		args:    n.args,
		probe:   n.probe,
	}
	t.Cleanup(func() {
		n.srv.cleanup(t)
		if n.admin != nil {
			_ = n.admin.Close() // its connections are to a killed server
		}
	})
	return n
}

// firstStartNode picks free ports for n (and a bus port when bus is set),
// calls prepare (which may write configuration naming the port) and starts
// n, with new ports after a collision.
func firstStartNode(t testing.TB, n *RedisNode, bus bool, prepare func() error) {
	t.Helper()
	firstStart(t, n.srv, func() error {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		n.port = ports[0]
		if bus {
			n.busPort = ports[1]
		}
		if prepare != nil {
			return prepare()
		}
		return nil
	})
	n.admin = redis.NewClient(&redis.Options{
		Addr: n.Addr(), DialTimeout: probeTimeout, ReadTimeout: probeTimeout,
		WriteTimeout: probeTimeout, MaxRetries: -1, PoolSize: 2,
	})
}

func (n *RedisNode) args() []string {
	args := []string{
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(n.port),
		"--save", "",
		"--appendonly", "no",
		"--dir", n.dir,
		"--protected-mode", "no",
		// Tests change protected configs (dbfilename, dir) to make
		// snapshots fail, as a full disk does (MISCONF).
		"--enable-protected-configs", "local",
		"--loglevel", "notice", // role changes and failovers are in the log
		// A replica's full sync starts at once, not after the default 5 s
		// wait for more replicas to share the transfer.
		"--repl-diskless-sync-delay", "0",
		// A replica loads its full sync from the socket, never from a
		// dump.rdb in --dir, which a restart would load: data would
		// survive a restart.
		"--repl-diskless-load", "swapdb",
		"--rdb-del-sync-files", "yes",
		// A master pings its replicas every second (default 10 s): until a
		// replica's offset moves from 0, CLUSTER SLOTS leaves it out.
		"--repl-ping-replica-period", "1",
	}
	if n.extra != nil {
		args = append(args, n.extra()...)
	}
	return args
}

// probe succeeds when PING answers and the server answering is ours.
func (n *RedisNode) probe(pid int) error {
	got, err := redisInfoPID(nil, redisAuth{}, n.Addr())
	if err != nil {
		return err
	}
	if got != pid {
		return fmt.Errorf("redis on %s is pid %d, not ours (%d)", n.Addr(), got, pid)
	}
	return nil
}

// info returns the fields of one INFO section of the node.
func (n *RedisNode) info(ctx context.Context, section string) (map[string]string, error) {
	s, err := n.admin.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("info %s of %s: %w", section, n.Addr(), err)
	}
	return infoFields(s), nil
}

// infoFields parses "key:value" lines (INFO, CLUSTER INFO).
func infoFields(s string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// running returns the nodes among ns whose process is up.
func running(ns []*RedisNode) []*RedisNode {
	var out []*RedisNode
	for _, n := range ns {
		if n.Pid() != 0 {
			out = append(out, n)
		}
	}
	return out
}

// waitUntil polls check every pollInterval until it returns nil, or fails
// the test with check's last error once timeout has passed. what names the
// condition in that message.
func waitUntil(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	if err := pollUntil(timeout, check); err != nil {
		t.Fatalf("testenv: %s: %v", what, err)
	}
}

// pollUntil polls check until it returns nil (then nil), or returns its last
// error (the last before the deadline cut a call short), wrapped, once
// timeout has passed. Each call of check gets a context
// that ends with the deadline.
func pollUntil(timeout time.Duration, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err // not one the deadline itself caused
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not after %v: %w", timeout, last)
		case <-tick.C:
		}
	}
}
