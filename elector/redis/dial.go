package redis

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/backend/hosts"
	"github.com/electd/electd/elector/internal/rediskit"
)

// The Redis backends as the store package lists them: one server, a
// master found through Sentinel, and a Redis Cluster. They share the
// election (one package, one set of scripts) and differ in how they dial.
var (
	// Backend is redis://[user@]host:6379[/db] and rediss:// (TLS).
	Backend = backend.Backend{
		Name:           "redis",
		Schemes:        []backend.Scheme{{Name: "redis"}, {Name: "rediss", TLS: true}},
		Form:           "redis://[user@]host:6379[/db]",
		Password:       backend.PasswordOptional,
		Parse:          hosts.Spec{DefaultPort: "6379", Check: check, Dial: Dial, AnswersPlain: rediskit.AnswersPlain}.Parse,
		Refused:        rediskit.Refused,
		PermissionHint: rediskit.PermissionHint,
	}
	// SentinelBackend is redis+sentinel://[user@]s1:26379,s2:26379/MASTER[/db]
	// and rediss+sentinel:// (TLS to the sentinels and the master). The
	// user and password are the master's; the sentinels' own password, if
	// they have one, is SentinelPassword.
	SentinelBackend = backend.Backend{
		Name:           "redis sentinel",
		Schemes:        []backend.Scheme{{Name: "redis+sentinel"}, {Name: "rediss+sentinel", TLS: true}},
		Form:           "redis+sentinel://[user@]s1:26379,s2:26379/MASTER[/db]",
		Password:       backend.PasswordOptional,
		Secrets:        []backend.Secret{SentinelPassword},
		Parse:          hosts.Spec{DefaultPort: "26379", Check: checkSentinel, Dial: DialSentinel, AnswersPlain: rediskit.AnswersPlain}.Parse,
		Refused:        rediskit.Refused,
		PermissionHint: rediskit.PermissionHint,
	}
	// ClusterBackend is redis+cluster://[user@]h1:6379,h2:6379 and
	// rediss+cluster:// (TLS): any of the cluster's nodes, from which the
	// client learns the others.
	ClusterBackend = backend.Backend{
		Name:           "redis cluster",
		Schemes:        []backend.Scheme{{Name: "redis+cluster"}, {Name: "rediss+cluster", TLS: true}},
		Form:           "redis+cluster://[user@]h1:6379,h2:6379",
		Password:       backend.PasswordOptional,
		Parse:          hosts.Spec{DefaultPort: "6379", Check: checkCluster, Dial: DialCluster, AnswersPlain: rediskit.AnswersPlain}.Parse,
		Refused:        rediskit.Refused,
		PermissionHint: rediskit.PermissionHint,
	}
)

// SentinelPassword is the Redis Sentinels' own password (requirepass in
// sentinel.conf), apart from the master's: --sentinel-password-file or
// $ELECTD_SENTINEL_PASSWORD.
var SentinelPassword = backend.Secret{Name: "sentinel-password", About: "the Redis Sentinels' own password"}

// check takes one host and an optional database number as the path.
func check(ep hosts.Endpoint) error {
	_, err := database(ep)
	return err
}

func database(ep hosts.Endpoint) (int, error) {
	if len(ep.Hosts) != 1 {
		return 0, elector.Configf("store", "redis URLs take one host, got %d (for several, use redis+sentinel:// or redis+cluster://)", len(ep.Hosts))
	}
	return parseDB(ep.Path)
}

func parseDB(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 65535 {
		return 0, elector.Configf("store", "redis database %q is not a number in 0..65535", s)
	}
	return n, nil
}

// checkSentinel takes the sentinels as hosts and MASTER[/db] as the path.
func checkSentinel(ep hosts.Endpoint) error {
	_, _, err := sentinelPath(ep)
	return err
}

func sentinelPath(ep hosts.Endpoint) (master string, db int, err error) {
	master, dbs, _ := strings.Cut(ep.Path, "/")
	if master == "" {
		return "", 0, elector.Configf("store", "%s:// needs the master's name as its path: %s://s1:26379,s2:26379/MASTER[/db]", ep.Scheme, ep.Scheme)
	}
	if strings.Contains(dbs, "/") {
		return "", 0, elector.Configf("store", "%s:// takes MASTER[/db] as its path, got %q", ep.Scheme, ep.Path)
	}
	db, err = parseDB(dbs)
	return master, db, err
}

// checkCluster takes any number of nodes and no path: a cluster has only
// database 0.
func checkCluster(ep hosts.Endpoint) error {
	if ep.Path != "" {
		return elector.Configf("store", "%s:// takes no path (a Redis Cluster has only database 0), got %q", ep.Scheme, ep.Path)
	}
	return nil
}

// Dial makes a client with the options electd runs with (ClientOptions).
// The client is lazy: Dial contacts nothing.
func Dial(_ context.Context, ep hosts.Endpoint) (backend.Conn, error) {
	db, err := database(ep)
	if err != nil {
		return nil, err
	}
	opts := ClientOptions(ep.Hosts[0])
	opts.Username, opts.Password, opts.DB = ep.User, ep.Password, db
	opts.TLSConfig = rediskit.ClientTLS(ep, ep.Hosts[0])
	rediskit.SetLogger(ep)
	return &conn{cli: redis.NewClient(opts), log: ep.Logger}, nil
}

// DialSentinel makes a failover client (FailoverOptions) that finds the
// master through the sentinels and follows it when they fail over. Every
// write then counts only once a replica has it (Config.Replicas 1).
func DialSentinel(_ context.Context, ep hosts.Endpoint) (backend.Conn, error) {
	master, db, err := sentinelPath(ep)
	if err != nil {
		return nil, err
	}
	opts := FailoverOptions(master, ep.Hosts)
	opts.Username, opts.Password, opts.DB = ep.User, ep.Password, db
	opts.SentinelPassword = ep.Secrets[SentinelPassword.Name]
	// The master's address comes from the sentinels: its name is checked
	// against the certificate as crypto/tls does, unless --tls-server-name
	// fixes one.
	opts.TLSConfig = rediskit.ClientTLS(ep, "")
	rediskit.SetLogger(ep)
	return &conn{cli: redis.NewFailoverClient(opts), log: ep.Logger, replicas: 1,
		sentinels: NewSentinels(master, sentinelOptions(ep))}, nil
}

// sentinelOptions are the options of a client of each sentinel of ep, with
// the sentinels' own password, as the failover client dials them.
func sentinelOptions(ep hosts.Endpoint) []*redis.Options {
	var out []*redis.Options
	for _, h := range ep.Hosts {
		o := rediskit.SentinelOptions(h)
		o.Password = ep.Secrets[SentinelPassword.Name]
		o.TLSConfig = rediskit.ClientTLS(ep, "")
		out = append(out, o)
	}
	return out
}

// DialCluster makes a cluster client (ClusterOptions) seeded with the URL's
// nodes.
func DialCluster(_ context.Context, ep hosts.Endpoint) (backend.Conn, error) {
	if err := checkCluster(ep); err != nil {
		return nil, err
	}
	opts := ClusterOptions(ep.Hosts)
	opts.Username, opts.Password = ep.User, ep.Password
	opts.TLSConfig = rediskit.ClientTLS(ep, "")
	rediskit.SetLogger(ep)
	return &conn{cli: redis.NewClusterClient(opts), log: ep.Logger}, nil
}

// ClientOptions are the options electd's Redis clients run with, for addr
// (rediskit.ClientOptions).
func ClientOptions(addr string) *redis.Options { return rediskit.ClientOptions(addr) }

// FailoverOptions are ClientOptions for the master named master, found
// through the sentinels at addrs (rediskit.FailoverOptions).
func FailoverOptions(master string, addrs []string) *redis.FailoverOptions {
	return rediskit.FailoverOptions(master, addrs)
}

// ClusterOptions are ClientOptions for a cluster seeded with addrs
// (rediskit.ClusterOptions).
func ClusterOptions(addrs []string) *redis.ClusterOptions { return rediskit.ClusterOptions(addrs) }

// conn is an open Redis client; the electors made on it share it.
type conn struct {
	cli       redis.UniversalClient
	log       *slog.Logger
	replicas  int        // Config.Replicas of its electors
	sentinels *Sentinels // Config.Sentinels of its electors
}

func (c *conn) NewElector(cand elector.Candidate) (elector.Locker, error) {
	e, err := New(Config{Client: c.cli, Candidate: cand, Replicas: c.replicas, Sentinels: c.sentinels})
	if err != nil {
		return nil, err // not a nil *Elector inside a non-nil Locker
	}
	return e, nil
}

func (c *conn) Ping(ctx context.Context) error { return c.cli.Ping(ctx).Err() }

func (c *conn) Close() error {
	err := c.cli.Close()
	if c.sentinels != nil {
		err = errors.Join(err, c.sentinels.Close())
	}
	return err
}

// CheckStart warns about settings of the server that put the election at
// risk, where the user may read them: a maxmemory-policy that evicts keys
// without a TTL (allkeys-*: electd's keys have none), with WAIT, a
// master without the replicas a write must reach, and under Sentinel,
// sentinels that cannot be asked or that the URL leaves out. It only logs.
func (c *conn) CheckStart(ctx context.Context, log *slog.Logger) {
	check := func(ctx context.Context, node *redis.Client) error {
		addr := node.Options().Addr
		policy, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
		switch {
		case err != nil:
			log.Debug("cannot read maxmemory-policy (CONFIG GET refused); make sure it is noeviction or volatile-*, as allkeys-* may evict the election's keys",
				"node", addr, "err", err)
		case strings.HasPrefix(policy["maxmemory-policy"], "allkeys-"):
			log.Warn("redis may evict the election's keys: an evicted lease ends a term early, an evicted token key lets tokens fall back to the server's clock; set maxmemory-policy noeviction (or a volatile-* policy: electd's keys carry no TTL)",
				"node", addr, "maxmemory-policy", policy["maxmemory-policy"])
		}
		if c.replicas == 0 {
			return nil
		}
		info, err := node.Info(ctx, "replication").Result()
		if err != nil {
			log.Debug("cannot read INFO replication", "node", addr, "err", err)
			return nil
		}
		var n int
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		if n < c.replicas {
			log.Warn("the master has fewer replicas than a write must reach (WAIT): no term can be granted or renewed until one connects",
				"node", addr, "replicas", n, "want", c.replicas)
		}
		return nil
	}
	switch cli := c.cli.(type) {
	case *redis.ClusterClient:
		if err := cli.ForEachMaster(ctx, check); err != nil {
			log.Debug("cannot reach every master to check its settings", "err", err)
		}
	case *redis.Client:
		_ = check(ctx, cli) // check only logs
	}
	if c.sentinels != nil {
		c.sentinels.checkStart(ctx, log)
	}
}
