package redis

import (
	"crypto/tls"

	"github.com/electd/electd/elector/backend"
)

// The Redlock backend (elector/redlock) runs its own scripts on several
// independent servers of this kind: it shares this package's client
// options, error classes and advice rather than repeating them.

// Classify marks err with its class (see elector.ErrorClass): the Redis
// error code, "conn", "timeout", ...
func Classify(err error) error { return classify(err) }

// IsPermanent reports whether retrying cannot fix err (credentials, ACL,
// scripting disabled, a closed client).
func IsPermanent(err error) bool { return isPermanent(err) }

// Explain wraps a permanent error with what the operator should check.
func Explain(err error) error { return explain(err) }

// ClientTLS is ep's TLS set-up for a client of host; nil for a plain scheme.
func ClientTLS(ep backend.Endpoint, host string) *tls.Config { return clientTLS(ep, host) }

// SetLogger sends go-redis's own messages to ep's logger at debug level.
func SetLogger(ep backend.Endpoint) { setLogger(ep) }
