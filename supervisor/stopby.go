package supervisor

import (
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// stopTimer fires when the child must start stopping to be gone before the
// term's deadline: StopBy(ValidUntil, StopTimeout, StopMargin). Renewals
// move ValidUntil forward; when the timer fires, due reports whether the
// moment has really come, and re-arms it for the new one if not.
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

func (st *stopTimer) at() time.Time {
	return elector.StopBy(st.term.ValidUntil(), st.stopTimeout, StopMargin)
}

func (st *stopTimer) arm() {
	st.t = st.clk.NewTimer(max(0, st.at().Sub(st.clk.Now())))
}

// C fires at the currently armed moment.
func (st *stopTimer) C() <-chan time.Time { return st.t.C() }

// due is called after C fired: true if the stop moment has come, else the
// timer is re-armed for the later moment earned by renewals.
func (st *stopTimer) due() bool {
	if !st.clk.Now().Before(st.at()) {
		return true
	}
	st.arm()
	return false
}

func (st *stopTimer) stop() { st.t.Stop() }
