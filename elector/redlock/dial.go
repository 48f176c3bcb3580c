package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/backend/hosts"
	"github.com/electd/electd/elector/internal/rediskit"
)

// Backend is redlock://[user@]h1:6379,h2:6379,h3:6379[/db] and redlocks://
// (TLS): a quorum over independent Redis servers (not replicas of one
// another, not a cluster), each dialled with the same credentials.
var Backend = backend.Backend{
	Name:           "redlock",
	Schemes:        []backend.Scheme{{Name: "redlock"}, {Name: "redlocks", TLS: true}},
	Form:           "redlock://[user@]h1:6379,h2:6379,h3:6379[/db]",
	About:          "a quorum of independent Redis servers",
	Password:       backend.PasswordOptional,
	Parse:          hosts.Spec{DefaultPort: "6379", Check: check, Dial: Dial, AnswersPlain: rediskit.AnswersPlain}.Parse,
	Refused:        rediskit.Refused,
	PermissionHint: rediskit.PermissionHint,
}

func check(ep hosts.Endpoint) error {
	if len(ep.Hosts) < MinServers {
		return elector.Configf("store", "%s:// needs at least %d independent servers, got %d: %s://h1:6379,h2:6379,h3:6379[/db] (with two, a majority is both and no server may fail; for one, use redis://)", ep.Scheme, MinServers, len(ep.Hosts), ep.Scheme)
	}
	seen := map[string]bool{}
	for _, h := range ep.Hosts {
		if seen[h] {
			return elector.Configf("store", "%s:// names %s twice: a quorum needs distinct servers", ep.Scheme, h)
		}
		seen[h] = true
	}
	_, err := database(ep.Path)
	return err
}

func database(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 65535 {
		return 0, elector.Configf("store", "redlock database %q is not a number in 0..65535 (the same database on every server)", s)
	}
	return n, nil
}

// Dial makes one client per server with the options electd runs with
// (redis.ClientOptions). The clients are lazy: Dial contacts nothing.
func Dial(_ context.Context, ep hosts.Endpoint) (backend.Conn, error) {
	if err := check(ep); err != nil {
		return nil, err
	}
	db, _ := database(ep.Path)
	c := &conn{log: ep.Logger}
	for _, h := range ep.Hosts {
		opts := rediskit.ClientOptions(h)
		opts.Username, opts.Password, opts.DB = ep.User, ep.Password, db
		opts.TLSConfig = rediskit.ClientTLS(ep, h)
		// One dial per request: go-redis would otherwise dial a server that
		// is down five times, 100 ms apart, within the request, and a round
		// (which waits for every server) would wait for it.
		opts.DialerRetries = 1
		c.servers = append(c.servers, Server{Addr: h, Client: redis.NewClient(opts)})
	}
	rediskit.SetLogger(ep)
	return c, nil
}

// conn is the open clients of a quorum; the electors made on it share them.
type conn struct {
	servers []Server
	log     *slog.Logger
	members members
}

func (c *conn) NewElector(cand elector.Candidate) (elector.Locker, error) {
	e, err := New(Config{Servers: c.servers, Candidate: cand})
	if err != nil {
		return nil, err // not a nil *Elector inside a non-nil Locker
	}
	return e, nil
}

// Ping asks every server and succeeds when a majority answers.
func (c *conn) Ping(ctx context.Context) error {
	errs := make([]error, len(c.servers))
	fanOut(len(c.servers), func(i int) { errs[i] = c.servers[i].Client.Ping(ctx).Err() })
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", c.servers[i].Addr, err))
		}
	}
	if len(c.servers)-len(failed) >= majority(len(c.servers)) {
		return nil
	}
	return fmt.Errorf("%d of %d redlock servers answered, a majority needs %d: %w",
		len(c.servers)-len(failed), len(c.servers), majority(len(c.servers)), errors.Join(failed...))
}

func (c *conn) Close() error {
	var errs []error
	for _, s := range c.servers {
		if err := s.Client.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.Addr, err))
		}
	}
	return errors.Join(errs...)
}
