// Package backoff is capped exponential backoff with jitter, for loops
// that retry a store request. It holds no timer and starts no goroutine:
// the caller waits Next on its own clock.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff doubles from Base up to Cap, with ±20 % jitter so that clients
// cut off together do not retry together. The zero value waits nothing;
// use New.
type Backoff struct {
	cur, base, cap time.Duration
}

// New returns a backoff from base up to cap (base is clamped to cap).
func New(base, cap time.Duration) *Backoff {
	return &Backoff{base: min(base, cap), cap: cap}
}

// Next is the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	if b.cur == 0 {
		b.cur = b.base
	} else {
		b.cur = min(2*b.cur, b.cap)
	}
	return time.Duration(float64(b.cur) * (0.8 + 0.4*rand.Float64()))
}

// Reset starts over from base.
func (b *Backoff) Reset() { b.cur = 0 }

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
