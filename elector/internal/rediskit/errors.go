// Package rediskit is what electd's backends on Redis servers share: the
// client options electd runs with, the classes of Redis errors (which a
// retry can fix, and which not), the advice given for a refusal, a
// request's patience, the run record, the decoding of a leader view, and
// the reading of an election's pub/sub channel. The single-server,
// Sentinel and Cluster backend (elector/redis) and the Redlock quorum
// (elector/redlock) both build on it as equals; it holds no election.
package rediskit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
)

// transientCodes are the Redis error codes that retrying can fix: the
// server is loading, busy, failing over, demoted (READONLY), out of memory,
// unable to persist (MISCONF), short of replicas, or its cluster is
// reconfiguring. Each is its own class (elector.ErrorClass). A renewal that
// fails with one costs that renewal, never the term: only the local
// deadline, or the store's word that the entry is gone or taken, ends it.
var transientCodes = []string{
	"MISCONF", "READONLY", "LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN",
	"MASTERDOWN", "OOM", "NOREPLICAS", "MOVED", "ASK",
}

// Classes of errors that are not Redis error codes.
const (
	ClassConn       = "conn"       // connection refused, reset or closed
	ClassMaxClients = "maxclients" // the server's client limit
	ClassAuth       = "auth"       // NOAUTH, WRONGPASS
	ClassNoPerm     = "NOPERM"     // the ACL denies a command or key
	ClassClosed     = "closed"     // the client was closed
	ClassError      = "ERR"        // any other error reply
	ClassNoAnswer   = "nil"        // no reply where one was due (a sentinel without the master)
	ClassKilled     = "killed"     // our script was stopped by SCRIPT KILL
	// ClassUnreplicated: a write no replica acknowledged (WAIT) in time.
	ClassUnreplicated = "unreplicated"
	// ClassUnconfirmed: a write the sentinels did not confirm, after it,
	// as made on the master with no failover of it in progress.
	ClassUnconfirmed = "unconfirmed"
)

// Classify marks err with its class (see elector.ErrorClass).
func Classify(err error) error {
	if err == nil {
		return nil
	}
	return elector.Classify(ErrorClass(err), err)
}

func ErrorClass(err error) string {
	var re redis.Error
	switch {
	case errors.Is(err, ErrUnconfirmed):
		// Whatever a sentinel answered (even an error reply), the
		// write did not count: retry.
		return ClassUnconfirmed
	case errors.Is(err, ErrUnreplicated):
		return ClassUnreplicated
	case errors.Is(err, redis.ErrClosed):
		return ClassClosed
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout):
		return elector.ClassTimeout
	case errors.Is(err, context.Canceled):
		return elector.ClassCanceled
	case redis.IsAuthError(err):
		return ClassAuth
	case redis.IsPermissionError(err), strings.Contains(err.Error(), "NOPERM"):
		return ClassNoPerm
	case redis.IsMaxClientsError(err):
		return ClassMaxClients
	case errors.Is(err, redis.Nil):
		// No answer where one was due: a sentinel that does not know
		// the master (yet), joined into the error of those unreachable.
		return ClassNoAnswer
	case errors.As(err, &re):
		msg := re.Error()
		if _, inner, ok := strings.Cut(msg, "Error running script"); ok {
			// Redis before 7 wraps the error of a call in a script:
			// "ERR Error running script (call to f_…): @user_script:1:
			// -READONLY You can't write …". Its code is the class.
			if i := strings.Index(inner, " -"); i >= 0 {
				msg = inner[i+2:]
			}
		}
		for _, code := range transientCodes {
			if strings.HasPrefix(strings.TrimPrefix(msg, "ERR "), code) {
				return code
			}
		}
		if strings.Contains(msg, "Script killed") {
			return ClassKilled // SCRIPT KILL of one of ours: it ran too long
		}
		return ClassError
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return elector.ClassTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.As(err, new(*net.OpError)):
		return ClassConn
	}
	return elector.ClassOther
}

// ErrUnreplicated: a write the server applied, but no replica acknowledged
// within the request's time (WAIT); the reply does not count.
var ErrUnreplicated = errors.New("no replica acknowledged the write in time")

// ErrUnconfirmed: a write the server applied and its replicas acknowledged,
// but that the sentinels did not confirm, after it, as made on the master
// they monitor with no failover of it in progress; the reply does not count.
var ErrUnconfirmed = errors.New("the sentinels did not confirm the write's master")

// PermanentError marks a failure that retrying cannot fix.
type PermanentError struct{ err error }

// Permanent marks err as a failure that retrying cannot fix.
func Permanent(err error) error { return &PermanentError{err} }

func (p *PermanentError) Error() string { return p.err.Error() }
func (p *PermanentError) Unwrap() error { return p.err }

// IsPermanent tells errors that retrying cannot fix (credentials, ACL,
// scripting disabled or broken, wrong key types, a closed client) from
// transient ones (network, timeouts, and the codes of transientCodes). A
// campaign ends on a permanent error; a term does not (see keep).
func IsPermanent(err error) bool {
	var p *PermanentError
	if err == nil {
		return false
	}
	if errors.As(err, &p) {
		return true
	}
	switch ErrorClass(err) {
	case ClassClosed, ClassAuth, ClassNoPerm, ClassError:
		return true
	}
	return false
}

// Explain wraps a permanent error with what the operator should check.
func Explain(err error) error {
	switch ErrorClass(err) {
	case ClassAuth:
		return fmt.Errorf("redis refused the credentials (check the user and password in the store URL): %w", err)
	case ClassNoPerm:
		return fmt.Errorf("redis ACL denies a command the election needs (EVALSHA/EVAL, SUBSCRIBE, PING, WAIT under Sentinel, and inside the scripts TIME, INFO, GET, SET, INCR, PUBLISH and sorted-set and hash commands on keys electd:{NAME}:*): %w", err)
	case ClassClosed:
		return fmt.Errorf("redis client closed: %w", err)
	}
	if strings.Contains(err.Error(), "can't run this command") {
		return fmt.Errorf("redis ACL denies a command the election needs: %w", err)
	}
	return fmt.Errorf("redis refused the election script (is scripting enabled and are the electd:{NAME}:* keys free for electd?): %w", err)
}
