package rediskit

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/backend/hosts"
)

// PermissionHint says what to grant a Redis user electd runs as.
const PermissionHint = "let its ACL use the keys and channels electd:* with +@read +@write +@scripting +@pubsub +ping +time +info +wait; see docs/OPERATIONS.md"

// ClientTLS is ep's TLS set-up for a client of host ("": whichever host
// it dials, named as crypto/tls does); nil for a plain scheme.
func ClientTLS(ep hosts.Endpoint, host string) *tls.Config {
	if ep.TLS == nil {
		return nil
	}
	c := ep.TLS.Clone()
	if c.ServerName == "" && host != "" {
		c.ServerName, _, _ = net.SplitHostPort(host)
	}
	return c
}

// SetLogger sends go-redis's own messages (its pool's dial retries, for
// instance) to ep's logger at debug level instead of to stderr.
func SetLogger(ep hosts.Endpoint) {
	if ep.Logger != nil {
		redis.SetLogger(clientLogger{log: ep.Logger})
	}
}

// ClientOptions are the options electd's Redis clients run with, for addr:
// requests bounded by their context (ContextTimeoutEnabled), and no retries
// inside the client (MaxRetries -1), as the elector retries on its own
// clock. A new connection greets the server with HELLO alone: no CLIENT
// SETINFO (DisableIdentity) and no CLIENT MAINT_NOTIFICATIONS (a Redis
// Enterprise feature), each of which would cost a round trip more before
// the first request after a reconnection (see Patience).
func ClientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                     addr,
		DialTimeout:              2 * time.Second,
		ContextTimeoutEnabled:    true,
		MaxRetries:               -1, // the elector retries on its own clock
		DisableIdentity:          true,
		MaintNotificationsConfig: noMaintNotifications(),
	}
}

func noMaintNotifications() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// FailoverOptions are ClientOptions for the master named master, found
// through the sentinels at addrs.
func FailoverOptions(master string, addrs []string) *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            master,
		SentinelAddrs:         addrs,
		DialTimeout:           2 * time.Second,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DisableIdentity:       true,
	}
}

// SentinelOptions are ClientOptions for a sentinel at addr, to which
// requests of its own go (SENTINEL MASTER): the failover client's sentinel
// connection is its own, unexported.
func SentinelOptions(addr string) *redis.Options {
	return ClientOptions(addr)
}

// ClusterOptions are ClientOptions for a cluster seeded with addrs. The
// node clients do not retry (MaxRetries -1), but the cluster client itself
// follows MOVED and ASK, and re-sends a request after a network error,
// LOADING, TRYAGAIN or CLUSTERDOWN, up to MaxRedirects (3) times, within the
// request's context. That is safe for the scripts: a renewal's deadline
// counts from the first send, and the server measures from a later one.
func ClusterOptions(addrs []string) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                    addrs,
		DialTimeout:              2 * time.Second,
		ContextTimeoutEnabled:    true,
		MaxRetries:               -1,
		DisableIdentity:          true,
		MaintNotificationsConfig: noMaintNotifications(),
	}
}

// Refused classifies Redis's refusals of credentials and permissions.
func Refused(err error) backend.Refusal {
	switch {
	case redis.IsAuthError(err):
		return backend.RefusedLogin
	case redis.IsPermissionError(err):
		return backend.RefusedPermission
	}
	return backend.NotRefused
}

// AnswersPlain sends PING in clear text and looks for a Redis reply.
func AnswersPlain(_ context.Context, c net.Conn) bool {
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
