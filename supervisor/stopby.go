package supervisor

import (
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// The stop rule.
//
// A leader's child must be gone before the term's ValidUntil, which is when
// the store may hand the term on. So the child starts stopping at
//
//	StopBy = ValidUntil − StopTimeout − StopMargin
//
// at the latest: StopSignal to the tree, SIGKILL after StopTimeout, and
// StopMargin for the SIGKILL, the reaping and scheduling delays. Renewals
// move ValidUntil, and so StopBy, forward.
//
// ValidUntil is a reading of the monotonic clock, which stops while the host
// is suspended; the lease on the store does not. So the stop timer runs on
// the boot clock (CLOCK_BOOTTIME, which counts suspended time) and fires at
// the real StopBy even across a suspension; and whenever the term's loop
// wakes, and before a child starts, it compares the two clocks: once they
// have drifted apart by more than SuspendBound since the term's deadline was
// first computed (Term.Suspended, from the grant's acknowledgement on, so a
// suspension while Campaign was returning counts too), the term's deadline
// cannot be trusted, and the term ends at once with SIGKILL to the tree
// (reason "suspended").

// StopMargin is the time, beyond StopTimeout, reserved before the lease
// deadline for SIGKILL, reaping and scheduling delays.
const StopMargin = 200 * time.Millisecond

// SuspendBound is how far the boot clock may run ahead of the monotonic
// clock during a term before the term ends: a suspension shorter than this
// fits in StopMargin; a longer one may have let the lease lapse unseen.
const SuspendBound = 50 * time.Millisecond

// stopTimer fires when the child must start stopping to be gone before the
// term's deadline. When it fires, due reports whether the moment has really
// come, and re-arms it for the later moment earned by renewals if not.
type stopTimer struct {
	clk         clock.Clock
	term        *elector.Term
	stopTimeout time.Duration
	t           clock.Timer
}

func (s *Supervisor) newStopTimer(term *elector.Term) *stopTimer {
	st := &stopTimer{clk: s.cfg.Clock, term: term, stopTimeout: s.cfg.StopTimeout}
	st.arm()
	return st
}

// at is the stop-by moment on the monotonic clock.
func (st *stopTimer) at() time.Time {
	return elector.StopBy(st.term.ValidUntil(), st.stopTimeout, StopMargin)
}

func (st *stopTimer) arm() {
	if st.t != nil {
		st.t.Stop() // fired: this releases its timerfd
	}
	st.t = st.clk.NewBootTimer(max(0, st.at().Sub(st.clk.Now())))
}

// C fires at the currently armed moment.
func (st *stopTimer) C() <-chan time.Time { return st.t.C() }

// suspended reports how long the host was suspended during the term, if
// that is more than SuspendBound.
func (st *stopTimer) suspended() (time.Duration, bool) {
	d := st.term.Suspended()
	return d, d > SuspendBound
}

// passed reports whether the child must not run (or start) any more: the
// stop-by moment has come, or the host was suspended during the term.
func (st *stopTimer) passed() bool {
	_, susp := st.suspended()
	return susp || !st.clk.Now().Before(st.at())
}

// due is called after C fired: true if the child must stop now, else the
// timer is re-armed for the later moment earned by renewals.
func (st *stopTimer) due() bool {
	if st.passed() {
		return true
	}
	st.arm()
	return false
}

func (st *stopTimer) stop() { st.t.Stop() }
