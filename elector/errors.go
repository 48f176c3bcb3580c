package elector

import (
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
