package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

const redisHow = "`apt-get install -y redis-server`"

// Redis is a redis-server run as a child process, without persistence:
// Start and Restart keep its port and bring it back with EMPTY data.
type Redis struct {
	lifecycle
	dir  string
	port int
	opts RedisOptions
	// admin is testenv's own ACL user when opts.Users is set (probe, Client).
	admin redisAuth
	// With opts.CA: the server's certificate, and testenv's client set-up.
	serverCert KeyPair
	testenvTLS *tls.Config
}

// StartRedis starts redis-server on a free loopback port, without
// persistence, and waits until it answers PING. It is killed in t.Cleanup.
// A missing binary skips the test (fails it when $CI is set).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	return StartRedisWith(t, RedisOptions{})
}

// StartRedisWith is StartRedis with TLS and ACL users (see RedisOptions).
func StartRedisWith(t testing.TB, opts RedisOptions) *Redis {
	t.Helper()
	return startRedis(t, opts, func() (int, error) {
		ports, err := freePorts(1)
		if err != nil {
			return 0, err
		}
		return ports[0], nil
	})
}

// startRedis is StartRedis with the port chooser given (tests use it to
// force a collision).
func startRedis(t testing.TB, opts RedisOptions, pick func() (int, error)) *Redis {
	t.Helper()
	bin := binary(t, "ELECTD_REDIS_SERVER", "redis-server", nil, redisHow)
	dir := t.TempDir()
	r := &Redis{dir: dir, opts: opts.withDefaults(t)}
	if len(opts.Users) > 0 {
		r.admin = redisAuth{user: "testenv-admin", password: randomPassword(t)}
	}
	if opts.CA != nil {
		r.serverCert = opts.CA.Server(t, "redis-server")
		own := opts.CA.Client(t, "testenv")
		r.testenvTLS = opts.CA.ClientTLS(t, &own)
		r.testenvTLS.ServerName = "127.0.0.1"
	}
	r.srv = &server{
		name:    "redis-server",
		bin:     bin,
		logPath: filepath.Join(dir, "redis.log"),
		args:    r.args,
		probe:   r.probe,
	}
	t.Cleanup(func() { r.srv.cleanup(t) }) // before t.TempDir's removal (LIFO)
	firstStart(t, r.srv, func() (err error) {
		r.port, err = pick()
		return err
	})
	return r
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// Client returns a go-redis client of this server, closed in t.Cleanup.
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	cli := redis.NewClient(&redis.Options{Addr: r.Addr(), TLSConfig: r.clientTLS(),
		Username: r.admin.user, Password: r.admin.password})
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func (r *Redis) args() []string {
	return append([]string{
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", r.dir,
		"--protected-mode", "no",
		"--loglevel", "warning",
		// Tests move the data directory (CONFIG SET dir) to make snapshots
		// fail, as a full disk does (MISCONF).
		"--enable-protected-configs", "local",
	}, r.securityArgs()...)
}

// probe succeeds when PING answers and the server answering is ours.
func (r *Redis) probe(pid int) error {
	got, err := redisInfoPID(r.clientTLS(), r.admin, r.Addr())
	if err != nil {
		return err
	}
	if got != pid {
		return fmt.Errorf("redis on %s is pid %d, not ours (%d)", r.Addr(), got, pid)
	}
	return nil
}

// RedisCommandStats reads INFO commandstats: the calls of every command,
// those run inside scripts included, by command name.
func RedisCommandStats(ctx context.Context, cli redis.UniversalClient) (map[string]int, error) {
	info, err := cli.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("info commandstats: %w", err)
	}
	stats := map[string]int{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.Atoi(calls)
		stats[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return stats, nil
}
