package redis

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// Backend is the Redis backend as the store package lists it:
// redis://[user@]host:6379[/db] and rediss:// (TLS).
var Backend = backend.Backend{
	Name:           "redis",
	Schemes:        map[string]bool{"redis": false, "rediss": true},
	DefaultPort:    "6379",
	Check:          check,
	Dial:           Dial,
	Refused:        refused,
	PermissionHint: "let its ACL use the keys and channels electd:* with +@read +@write +@scripting +@pubsub +ping +time +info; see docs/OPERATIONS.md",
	AnswersPlain:   answersPlain,
}

// check takes one host and an optional database number as the path.
func check(ep backend.Endpoint) error {
	_, err := database(ep)
	return err
}

func database(ep backend.Endpoint) (int, error) {
	if len(ep.Hosts) != 1 {
		return 0, elector.Configf("store", "redis URLs take one host, got %d", len(ep.Hosts))
	}
	if ep.Path == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(ep.Path)
	if err != nil || n < 0 || n > 65535 {
		return 0, elector.Configf("store", "redis database %q is not a number in 0..65535", ep.Path)
	}
	return n, nil
}

// Dial makes a client with the options electd runs with (ClientOptions).
// The client is lazy: Dial contacts nothing.
func Dial(_ context.Context, ep backend.Endpoint) (backend.Conn, error) {
	db, err := database(ep)
	if err != nil {
		return nil, err
	}
	opts := ClientOptions(ep.Hosts[0])
	opts.Username, opts.Password, opts.DB = ep.User, ep.Password, db
	if ep.TLS != nil {
		opts.TLSConfig = ep.TLS.Clone()
		if opts.TLSConfig.ServerName == "" {
			host, _, _ := net.SplitHostPort(ep.Hosts[0])
			opts.TLSConfig.ServerName = host
		}
	}
	if ep.Logger != nil {
		redis.SetLogger(clientLogger{log: ep.Logger})
	}
	return &conn{cli: redis.NewClient(opts)}, nil
}

// ClientOptions are the options electd's Redis clients run with, for addr:
// requests bounded by their context (ContextTimeoutEnabled), and no retries
// inside the client (MaxRetries -1), as the elector retries on its own
// clock.
func ClientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		DialTimeout:           2 * time.Second,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // the elector retries on its own clock
	}
}

// conn is an open Redis client; the electors made on it share it.
type conn struct{ cli *redis.Client }

func (c *conn) NewElector(cand elector.Candidate) (elector.Locker, error) {
	e, err := New(Config{Client: c.cli, Candidate: cand})
	if err != nil {
		return nil, err // not a nil *Elector inside a non-nil Locker
	}
	return e, nil
}

func (c *conn) Ping(ctx context.Context) error { return c.cli.Ping(ctx).Err() }

func (c *conn) Close() error { return c.cli.Close() }

// refused classifies Redis's refusals of credentials and permissions.
func refused(err error) backend.Refusal {
	switch {
	case redis.IsAuthError(err):
		return backend.RefusedLogin
	case redis.IsPermissionError(err):
		return backend.RefusedPermission
	}
	return backend.NotRefused
}

// answersPlain sends PING in clear text and looks for a Redis reply.
func answersPlain(_ context.Context, c net.Conn) bool {
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return false
	}
	b := make([]byte, 16)
	n, _ := io.ReadAtLeast(c, b, 5)
	for _, w := range []string{"+PONG", "-NOAUTH", "-ERR", "-NOPERM"} {
		if strings.HasPrefix(string(b[:n]), w) {
			return true
		}
	}
	return false
}

// clientLogger sends go-redis's own messages (its pool's dial retries, for
// instance) to the store's log at debug level instead of to stderr.
type clientLogger struct{ log *slog.Logger }

func (l clientLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.Log(ctx, slog.LevelDebug, "redis client: "+fmt.Sprintf(format, v...))
}
