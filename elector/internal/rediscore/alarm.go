package rediscore

import (
	"time"

	"github.com/electd/electd/clock"
)

// Alarm is the wake-up of a leader view's loop when the lease a view
// reported runs out: a timer on the configured clock that may be unset.
type Alarm struct {
	clk clock.Clock
	t   clock.Timer
}

// NewAlarm returns an unset Alarm on clk.
func NewAlarm(clk clock.Clock) *Alarm { return &Alarm{clk: clk} }

// C fires once the alarm set goes off; nil (never) while unset.
func (a *Alarm) C() <-chan time.Time {
	if a.t == nil {
		return nil
	}
	return a.t.C()
}

// Set sets the alarm d from now, replacing any.
func (a *Alarm) Set(d time.Duration) {
	a.Stop()
	a.t = a.clk.NewTimer(d)
}

// Stop unsets the alarm.
func (a *Alarm) Stop() {
	if a.t != nil {
		a.t.Stop()
		a.t = nil
	}
}
