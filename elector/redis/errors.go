package redis

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
	classConn       = "conn"       // connection refused, reset or closed
	classMaxClients = "maxclients" // the server's client limit
	classAuth       = "auth"       // NOAUTH, WRONGPASS
	classNoPerm     = "NOPERM"     // the ACL denies a command or key
	classClosed     = "closed"     // the client was closed
	classError      = "ERR"        // any other error reply
	classNoAnswer   = "nil"        // no reply where one was due (a sentinel without the master)
	classKilled     = "killed"     // our script was stopped by SCRIPT KILL
	// classUnreplicated: a write no replica acknowledged (WAIT) in time.
	classUnreplicated = "unreplicated"
)

// classify marks err with its class (see elector.ErrorClass).
func classify(err error) error {
	if err == nil {
		return nil
	}
	return elector.Classify(errorClass(err), err)
}

func errorClass(err error) string {
	var re redis.Error
	switch {
	case errors.Is(err, errUnreplicated):
		return classUnreplicated
	case errors.Is(err, redis.ErrClosed):
		return classClosed
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout):
		return elector.ClassTimeout
	case errors.Is(err, context.Canceled):
		return elector.ClassCanceled
	case redis.IsAuthError(err):
		return classAuth
	case redis.IsPermissionError(err), strings.Contains(err.Error(), "NOPERM"):
		return classNoPerm
	case redis.IsMaxClientsError(err):
		return classMaxClients
	case errors.Is(err, redis.Nil):
		// No answer where one was due: a sentinel that does not know
		// the master (yet), joined into the error of those unreachable.
		return classNoAnswer
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
			return classKilled // SCRIPT KILL of one of ours: it ran too long
		}
		return classError
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return elector.ClassTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.As(err, new(*net.OpError)):
		return classConn
	}
	return elector.ClassOther
}

// errUnreplicated: a write the server applied, but no replica acknowledged
// within the request's time (WAIT); the reply does not count.
var errUnreplicated = errors.New("no replica acknowledged the write in time")

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// isPermanent tells errors that retrying cannot fix (credentials, ACL,
// scripting disabled or broken, wrong key types, a closed client) from
// transient ones (network, timeouts, and the codes of transientCodes). A
// campaign ends on a permanent error; a term does not (see keep).
func isPermanent(err error) bool {
	var p *permanentError
	if err == nil {
		return false
	}
	if errors.As(err, &p) {
		return true
	}
	switch errorClass(err) {
	case classClosed, classAuth, classNoPerm, classError:
		return true
	}
	return false
}

// explain wraps a permanent error with what the operator should check.
func explain(err error) error {
	switch errorClass(err) {
	case classAuth:
		return fmt.Errorf("redis refused the credentials (check the user and password in the store URL): %w", err)
	case classNoPerm:
		return fmt.Errorf("redis ACL denies a command the election needs (EVALSHA/EVAL, SUBSCRIBE, PING, WAIT under Sentinel, and inside the scripts TIME, INFO, GET, SET, INCR, PUBLISH and sorted-set and hash commands on keys electd:{NAME}:*): %w", err)
	case classClosed:
		return fmt.Errorf("redis client closed: %w", err)
	}
	if strings.Contains(err.Error(), "can't run this command") {
		return fmt.Errorf("redis ACL denies a command the election needs: %w", err)
	}
	return fmt.Errorf("redis refused the election script (is scripting enabled and are the electd:{NAME}:* keys free for electd?): %w", err)
}
