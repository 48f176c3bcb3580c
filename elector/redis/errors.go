package redis

import "github.com/electd/electd/elector/internal/rediskit"

// The classes of Redis errors are rediskit's, shared with the Redlock
// backend; these names keep this package's code short.
const (
	classConn         = rediskit.ClassConn
	classMaxClients   = rediskit.ClassMaxClients
	classAuth         = rediskit.ClassAuth
	classNoPerm       = rediskit.ClassNoPerm
	classClosed       = rediskit.ClassClosed
	classError        = rediskit.ClassError
	classNoAnswer     = rediskit.ClassNoAnswer
	classKilled       = rediskit.ClassKilled
	classUnreplicated = rediskit.ClassUnreplicated
	classUnconfirmed  = rediskit.ClassUnconfirmed
)

// errUnreplicated: a write the server applied, but no replica acknowledged
// within the request's time (WAIT); the reply does not count.
var errUnreplicated = rediskit.ErrUnreplicated

// errUnconfirmed: a step the sentinels did not confirm after it (Sentinels);
// the reply does not count.
var errUnconfirmed = rediskit.ErrUnconfirmed

type permanentError = rediskit.PermanentError

func classify(err error) error    { return rediskit.Classify(err) }
func errorClass(err error) string { return rediskit.ErrorClass(err) }
func isPermanent(err error) bool  { return rediskit.IsPermanent(err) }
func explain(err error) error     { return rediskit.Explain(err) }
