// Package clock abstracts time so that deadline logic can be tested without
// sleeping. Real is the wall clock (with Go's monotonic readings, so deadlines
// are immune to wall-clock steps); Fake is advanced by hand in tests.
//
// The monotonic clock stops while the host is suspended. Deadline logic that
// must hold in real time (a lease on a store keeps expiring while this host
// sleeps) reads Suspended beside Now and arms NewBootTimer, which counts the
// suspended time too (CLOCK_BOOTTIME).
package clock

import (
	"context"
	"time"
)

// Clock tells the time and schedules callbacks.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer returns a timer whose channel receives once d has elapsed.
	NewTimer(d time.Duration) Timer
	// NewBootTimer is NewTimer on a clock that also counts the time the host
	// spent suspended: after a resume it fires at once if d has passed in
	// real time, where a NewTimer timer would still wait.
	NewBootTimer(d time.Duration) Timer
	// Suspended is how long the host has been suspended (since boot, or
	// since the fake's start): the amount by which Now lags real time. Only
	// its changes matter.
	Suspended() time.Duration
}

// Timer is a stoppable one-shot timer. C is nil for timers made by AfterFunc.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it.
	Stop() bool
}

// Real is the system clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return realTimer{t: time.AfterFunc(d, f)} }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// OrReal returns c, or Real when c is nil.
func OrReal(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Sleep waits d on c or until ctx ends. It returns nil once d has elapsed,
// else ctx.Err().
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
