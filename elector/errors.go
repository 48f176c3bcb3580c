package elector

import (
	"context"
	"errors"
	"fmt"
)

// Sentinels. Check them with errors.Is.
var (
	// ErrNoLeader: the election has no leader right now.
	ErrNoLeader = errors.New("no leader")
	// ErrClosed: the Elector was closed.
	ErrClosed = errors.New("elector closed")
	// ErrLeaseExpired: the local deadline passed without an acknowledged renewal.
	ErrLeaseExpired = errors.New("lease deadline passed without renewal")
	// ErrLeaseLost: the store reports the lease gone (revoked or expired there).
	ErrLeaseLost = errors.New("lease lost on the store")
	// ErrLeadershipLost: the leader's key was deleted or replaced in the store.
	ErrLeadershipLost = errors.New("leader key deleted or replaced")
	// ErrResigned: the term ended by Resign.
	ErrResigned = errors.New("resigned")
)

// ConfigError is a refused configuration: Field names the option (as the
// operator knows it, e.g. "ttl") and Reason says which rule it breaks.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }

// Configf builds a *ConfigError.
func Configf(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// StoreError is a failed store operation. Op names it ("grant", "renew",
// "campaign", "watch", ...); Permanent errors (bad credentials, missing
// permissions) end a campaign instead of being retried.
type StoreError struct {
	Op        string
	Err       error
	Permanent bool
}

func (e *StoreError) Error() string { return fmt.Sprintf("store %s: %v", e.Op, e.Err) }
func (e *StoreError) Unwrap() error { return e.Err }

// LossReason names why a term ended, for metrics and logs: "deadline",
// "lease_lost", "key_lost", "resigned", "closed" or "other".
func LossReason(err error) string {
	switch {
	case errors.Is(err, ErrLeaseExpired):
		return "deadline"
	case errors.Is(err, ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, ErrLeadershipLost):
		return "key_lost"
	case errors.Is(err, ErrResigned):
		return "resigned"
	case errors.Is(err, ErrClosed):
		return "closed"
	default:
		return "other"
	}
}

// Error classes that every backend may report (ErrorClass). A backend adds
// its own store's classes (Redis's error prefixes, gRPC codes) with
// Classify; keep them few and stable, since they label a metric.
const (
	ClassTimeout  = "timeout"  // the request's deadline passed
	ClassCanceled = "canceled" // the caller gave up
	ClassOther    = "other"    // nothing more specific is known
)

// classed is an error with the class its backend gave it.
type classed struct {
	class string
	err   error
}

func (c *classed) Error() string { return c.err.Error() }
func (c *classed) Unwrap() error { return c.err }

// Classify returns err marked with class, which ErrorClass reports. A nil
// err stays nil.
func Classify(class string, err error) error {
	if err == nil {
		return nil
	}
	return &classed{class: class, err: err}
}

// ErrorClass names the kind of a store failure for logs, metrics
// (store_errors_total{class}) and /healthz: the class a backend gave it with
// Classify, else "timeout", "canceled" or "other".
func ErrorClass(err error) string {
	var c *classed
	switch {
	case errors.As(err, &c):
		return c.class
	case errors.Is(err, context.DeadlineExceeded):
		return ClassTimeout
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	}
	return ClassOther
}

// onServer names the server of a store of several independent servers (a
// Redlock quorum) that failed.
type onServer struct {
	server string
	err    error
}

func (s *onServer) Error() string { return s.server + ": " + s.err.Error() }
func (s *onServer) Unwrap() error { return s.err }

// WithServer returns err marked as a failure of server (host:port), which
// ErrorServer reports (store_errors_total{server}). A nil err stays nil.
func WithServer(server string, err error) error {
	if err == nil {
		return nil
	}
	return &onServer{server: server, err: err}
}

// ErrorServer names the server a failure was marked with by WithServer,
// or "" for a store seen as one.
func ErrorServer(err error) string {
	var s *onServer
	if errors.As(err, &s) {
		return s.server
	}
	return ""
}
