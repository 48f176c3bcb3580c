// Package backend is the contract between the store package (store/) and
// the backends under elector/: what a backend exports so that store/ can
// list it in one line and hand out its electors. It is apart from package
// elector so that the contract every process links (the supervisor's
// re-executed init included) does not pull in crypto/tls and net.
package backend

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"

	"github.com/electd/electd/elector"
)

// Backend is what a backend package offers the store package (store/),
// which parses --store URLs, reads credentials and TLS files, redacts
// secrets and hands out electors: a backend never sees a flag or a URL.
// Each backend exports one Backend value, and store/ lists each in one
// line.
type Backend struct {
	// Name names the store in messages, e.g. "etcd".
	Name string
	// Schemes maps every URL scheme the backend takes to whether it means
	// TLS, e.g. {"etcd": false, "etcds": true}.
	Schemes map[string]bool
	// UserWithPassword says a password needs a user name (etcd has no
	// default user).
	UserWithPassword bool
	// DefaultPort is shown in errors about a host without a port.
	DefaultPort string
	// Check refuses, with an *elector.ConfigError naming "store", an endpoint the
	// backend cannot use (too many hosts, a path it does not take). It
	// contacts nothing.
	Check func(ep Endpoint) error
	// Dial opens a connection to an endpoint that passed Check. Clients are
	// lazy: an unreachable store is not an error here (Conn.Ping tells),
	// except where the store's client logs in at dial time; then Dial
	// retries until ctx ends, and returns a refusal at once.
	Dial func(ctx context.Context, ep Endpoint) (Conn, error)
	// Refused classifies an error of a request: a refusal of the
	// credentials or of a permission, which no retry can fix, or
	// NotRefused.
	Refused func(err error) Refusal
	// PermissionHint says what to grant when the store refuses a
	// permission (RefusedPermission), e.g. "grant the user's role
	// readwrite on the prefix /electd/".
	PermissionHint string
	// AnswersPlain reports whether conn, a clear-text TCP connection to a
	// store host, answers the backend's protocol: store/ uses it to tell
	// an operator that a TLS URL points at a plain server.
	AnswersPlain func(ctx context.Context, conn net.Conn) bool
	// SentinelPassword says the backend takes a second password, for the
	// Redis Sentinels that name its master (Endpoint.SentinelPassword);
	// store/ refuses one for any other backend.
	SentinelPassword bool
}

// Endpoint is a parsed store URL with its secrets: plain data.
type Endpoint struct {
	// Scheme is the URL's scheme as given (e.g. "etcds").
	Scheme string
	// Hosts are the URL's host:port pairs, at least one, in order.
	Hosts []string
	// Path is the URL's path without its leading and trailing '/'; "" if
	// none.
	Path string
	// User and Password are the credentials ("" for none), wherever
	// store/ found them.
	User, Password string
	// SentinelPassword is the sentinels' password ("" for none), for a
	// backend with Backend.SentinelPassword.
	SentinelPassword string
	// TLS is the TLS configuration; nil for a plain scheme.
	TLS *tls.Config
	// Logger receives the client's own messages; its secrets are scrubbed.
	Logger *slog.Logger
	// Diagnose, when set, looks behind a request that timed out for a
	// refusal that no retry can fix (gRPC hides a TLS handshake's error
	// behind its deadline) and returns it as an *elector.ConfigError
	// naming the flag, or nil. A Dial that retries calls it between
	// attempts.
	Diagnose func(ctx context.Context) error
}

// Conn is a backend's open connection to its store.
type Conn interface {
	// NewElector validates c (elector.Candidate.Validate) and returns a candidate
	// on this connection. It contacts nothing.
	NewElector(c elector.Candidate) (elector.Locker, error)
	// Ping makes one cheap request.
	Ping(ctx context.Context) error
	// Close closes the connection; close the electors first.
	Close() error
}

// Refusal is a kind of refusal by the store, which no retry can fix.
type Refusal int

// The kinds of Refusal.
const (
	NotRefused        Refusal = iota
	RefusedLogin              // the user name or the password is wrong
	RefusedNoUser             // authentication is on and no (known) user was given
	RefusedPermission         // the user may not do what electd needs
)
