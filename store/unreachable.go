package store

import "fmt"

// UnreachableError: the store did not answer within a bound its caller
// set (`electd lock` within --wait, `electd leader --watch` within
// --timeout). It is not a refusal, nor a lock held by another: a cron
// wrapper retries a busy lock later, and alerts on a store that is down.
// electd exits 69 (EX_UNAVAILABLE) with it.
type UnreachableError struct {
	What  string // what could not be done, e.g. "lock job: not acquired within --wait 5s"
	Store string // the store URL, redacted (Store.Redacted)
	Err   error  // the store's last answer
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s: the store %s cannot be reached: %v", e.What, e.Store, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }
