// Package backoff is capped exponential backoff, the one growing delay of
// electd: for loops that retry a store request (Next, with jitter) and for
// the supervisor's cool-down after failures of the child and its delay
// before a restart in place (Step and Delay, exact, as they are logged and
// reported). It holds no timer and starts no goroutine: the caller waits
// on its own clock.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff doubles from base up to cap, one step at a time, until Reset.
// The zero value waits nothing; use New.
type Backoff struct {
	base, cap time.Duration
	steps     int // since the last Reset
}

// New returns a backoff from base up to cap (base is clamped to cap).
func New(base, cap time.Duration) *Backoff {
	return &Backoff{base: min(base, cap), cap: cap}
}

// Delay is the wait now, exact: base before any step and after one, then
// doubling with each further step, never more than cap.
func (b *Backoff) Delay() time.Duration {
	d := b.base
	for i := 1; i < b.steps && d < b.cap; i++ {
		if d > b.cap/2 {
			return b.cap // doubling would pass cap, or overflow
		}
		d *= 2
	}
	return min(d, b.cap)
}

// Step counts one more failure.
func (b *Backoff) Step() { b.steps++ }

// Steps is how many steps were taken since the last Reset.
func (b *Backoff) Steps() int { return b.steps }

// Next takes a step and returns the wait before the next attempt: Delay
// with ±20 % jitter, so that clients cut off together do not retry
// together.
func (b *Backoff) Next() time.Duration {
	b.Step()
	return time.Duration(float64(b.Delay()) * (0.8 + 0.4*rand.Float64()))
}

// Reset starts over from base.
func (b *Backoff) Reset() { b.steps = 0 }

// Lasted reports whether a run of ran is long enough to start over (Reset):
// at least cap. The supervisor's child that ran that long did work, and
// its next failure starts a new streak.
func (b *Backoff) Lasted(ran time.Duration) bool { return ran >= b.cap }

// Waiting is the backoff of a candidate's requests while it waits: from
// 25 ms up to the renewal interval (at most a second).
func Waiting(renewInterval time.Duration) *Backoff {
	return New(25*time.Millisecond, min(renewInterval, time.Second))
}

// Renewing is the backoff of a leader's renewals: from 25 ms up to a
// quarter of the renewal interval (at most 250 ms), so that a store that
// answers again is found well before the child must be stopped, at a cost
// of at most four requests per interval while it fails.
func Renewing(renewInterval time.Duration) *Backoff {
	return New(25*time.Millisecond, min(renewInterval/4, 250*time.Millisecond))
}
