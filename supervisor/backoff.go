package supervisor

import (
	"time"
)

// backoff is the supervisor's one growing delay, used twice: the cool-down
// before campaigning again after the child failed (Supervisor.coolDown),
// and the delay before an --on-exit restart in place (hold). Each step
// doubles it from first up to max; reset brings it back to first. A run of
// the child that lasted at least max resets it (lasted): the child then
// did work, and its next failure starts a new streak.
type backoff struct {
	first, max time.Duration
	steps      int // steps taken since the last reset
}

// delay is the wait now: first before any step, first after one, then
// doubling with each further step, never more than max.
func (b *backoff) delay() time.Duration {
	d := b.first
	for i := 1; i < b.steps && d < b.max; i++ {
		if d > b.max/2 {
			return b.max // doubling would pass max, or overflow
		}
		d *= 2
	}
	return min(d, b.max)
}

// step counts one more quick end.
func (b *backoff) step() { b.steps++ }

// reset starts over from first.
func (b *backoff) reset() { b.steps = 0 }

// lasted reports whether a run of ran is long enough to reset b.
func (b *backoff) lasted(ran time.Duration) bool { return ran >= b.max }
