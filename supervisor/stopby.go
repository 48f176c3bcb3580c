package supervisor

import (
	"fmt"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// The stop rule. (The lease rule, how a renewal earns a term's ValidUntil,
// is elector/timing.go; this file is what the supervisor does with it.)
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
// One renewal may be lost without the child being stopped: after the last
// acknowledged renewal, the child must still be allowed to run for two
// renewal intervals. So a stop timeout must be shorter than the budget
//
//	Window − 2·RenewInterval − Lag − StopMargin      (Window = TTL·(1 − Drift) − Epsilon)
//
// (Lag is how much older than its own request a renewal's evidence may be,
// 0 but on ZooKeeper: Timing.Lag.)
// and StopTimeout, the one check of it, refuses any other. A ttl whose
// budget is not positive admits no stop timeout at all; the refusal then
// names the shortest ttl that works. When the operator sets none, the stop
// timeout is DefaultStopTimeout: 5 s if the budget allows it, else half the
// budget.
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
// (reason "suspended"). Once the child is stopping, its grace runs on the
// boot clock too and ends with SIGKILL when a suspension is seen (see
// Child.grace): the loop no longer wakes then.

// StopMargin is the time, beyond StopTimeout, reserved before the lease
// deadline for SIGKILL, reaping and scheduling delays.
const StopMargin = 200 * time.Millisecond

// SuspendBound is how far the boot clock may run ahead of the monotonic
// clock during a term before the term ends: a suspension shorter than this
// fits in StopMargin; a longer one may have let the lease lapse unseen.
const SuspendBound = 50 * time.Millisecond

// defaultStop is the stop timeout when the operator sets none and the
// timing allows it.
const defaultStop = 5 * time.Second

// StopBy is when a leader must start stopping its child, whose term is
// guaranteed until validUntil: early enough for stopTimeout and StopMargin.
func StopBy(validUntil time.Time, stopTimeout time.Duration) time.Time {
	return validUntil.Add(-stopTimeout - StopMargin)
}

// stopBudget is what timing t leaves for the stop timeout, exclusive: the
// guaranteed window after a renewal less room for a missed renewal, the
// store's renewal lag (Timing.Lag) and StopMargin. Not positive: no stop timeout fits.
func stopBudget(t elector.Timing) time.Duration {
	return t.Window() - 2*t.RenewInterval - t.Lag - StopMargin
}

// DefaultStopTimeout is the stop timeout for timing t (after WithDefaults)
// when the operator sets none: 5 s when the budget allows it, else half the
// budget, rounded to the millisecond; 0 (SIGKILL at once) when the budget
// is too small for that, and 0 too when no stop timeout fits (StopTimeout
// refuses the timing then).
func DefaultStopTimeout(t elector.Timing) time.Duration {
	budget := stopBudget(t)
	switch {
	case defaultStop < budget:
		return defaultStop
	case budget <= time.Millisecond: // half of it could round up to all of it
		return 0
	}
	return (budget / 2).Round(time.Millisecond)
}

// StopTimeout is the one check of the stop rule. It returns the stop
// timeout a leader with timing t (after WithDefaults, and valid) uses:
// asked if set, else DefaultStopTimeout(t); or an *elector.ConfigError if
// that is negative or not shorter than the budget. Field names match the
// CLI flags: "stop-timeout" when a shorter one would do, "ttl" when no stop
// timeout fits, with the shortest ttl that admits the one asked for (or the
// default).
func StopTimeout(t elector.Timing, asked time.Duration, set bool) (time.Duration, error) {
	if !set {
		asked = DefaultStopTimeout(t)
	}
	if asked < 0 {
		return 0, elector.Configf("stop-timeout", "must not be negative, got %s", asked)
	}
	budget := stopBudget(t)
	if asked < budget {
		return asked, nil
	}
	renew := fmt.Sprintf("keeping renew-interval %s", t.RenewInterval)
	if renewScales(t) {
		renew = "renew-interval ttl/5"
	}
	minTTL, ok := shortestTTL(t, asked, set)
	if budget > 0 {
		advice := "or a longer ttl"
		if ok {
			advice = fmt.Sprintf("or a ttl of at least %s (%s)", minTTL, renew)
		}
		return 0, elector.Configf("stop-timeout", "%s is too long for ttl %s: the child must be stopped by the lease deadline (%s after a renewal) less stop-timeout and a %s margin, which must leave room for a missed renewal (2×%s); use a stop-timeout below %s %s",
			asked, t.TTL, t.Window(), StopMargin, t.RenewInterval, budget.Round(time.Millisecond), advice)
	}
	why := fmt.Sprintf("%s is too short to stop the child in time: the lease is guaranteed for %s after a renewal, and room for a missed renewal (2×%s) and the %s stop margin take all of it",
		t.TTL, t.Window(), t.RenewInterval, StopMargin)
	switch {
	case !ok && renewScales(t):
		return 0, elector.Configf("ttl", "%s; no ttl leaves room for stop-timeout %s: use a shorter stop-timeout", why, asked)
	case !ok:
		return 0, elector.Configf("ttl", "%s; no ttl leaves room for stop-timeout %s with renew-interval %s: use a shorter stop-timeout or renew-interval", why, asked, t.RenewInterval)
	case set:
		return 0, elector.Configf("ttl", "%s; use a ttl of at least %s for stop-timeout %s (%s)", why, minTTL, asked, renew)
	}
	return 0, elector.Configf("ttl", "%s; use a ttl of at least %s (%s), where the default stop-timeout is %s (a longer ttl gives the child time to stop before SIGKILL)",
		why, minTTL, renew, DefaultStopTimeout(withTTL(t, minTTL)))
}

// checkTerm is the stop rule where the stop timeout meets a term: the
// term's timing (Term.Timing, the elector's, which may differ from the
// one configured: a store may negotiate another lease, or renew with a
// lag, Timing.Lag) must be valid and leave room for the stop timeout, or
// no child may start under the term. It returns the stop timeout the term
// runs with: stopTimeout, or, when that is the default (isDefault: the
// operator set none), the default of the term's own timing if that is
// shorter. The error (wrapping StopTimeout's *elector.ConfigError, which
// names --stop-timeout or --ttl and what to set) says why the term is
// refused; hold then gives the term up and the loop ends with it.
func checkTerm(term *elector.Term, stopTimeout time.Duration, isDefault bool) (time.Duration, error) {
	t, err := term.Timing().Checked()
	if err == nil {
		if isDefault {
			stopTimeout = min(stopTimeout, DefaultStopTimeout(t))
		}
		_, err = StopTimeout(t, stopTimeout, true)
	}
	if err != nil {
		return 0, fmt.Errorf("refuse term %d (timing %s) before starting a child: the stop timeout %s does not fit it; set --stop-timeout and --ttl as follows: %w",
			term.Token, t, stopTimeout, err)
	}
	return stopTimeout, nil
}

// shortestTTL is the shortest ttl, in whole milliseconds, for which
// StopTimeout(withTTL(t, ttl), asked, set) succeeds. ok is false if no ttl
// up to 2^62 ns (146 years) does.
func shortestTTL(t elector.Timing, asked time.Duration, set bool) (ttl time.Duration, ok bool) {
	fits := func(ms int64) bool {
		c := withTTL(t, time.Duration(ms)*time.Millisecond)
		stop := asked
		if !set {
			stop = DefaultStopTimeout(c)
		}
		// A renew interval of 2^61 or more cannot fit under any ttl here, and
		// twice it would overflow.
		return c.RenewInterval < 1<<61 && c.Validate() == nil && stop < stopBudget(c)
	}
	// fits is monotone: on a millisecond grid the budget grows with the ttl
	// (by at least (1 − Drift − 2/5)·1ms a step, positive as Validate keeps
	// Drift below 0.5), and so does what Validate accepts.
	lo, hi := int64(0), int64(1<<62)/int64(time.Millisecond)
	if !fits(hi) {
		return 0, false
	}
	for lo+1 < hi { // fits(hi) and not fits(lo)
		mid := lo + (hi-lo)/2
		if fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return time.Duration(hi) * time.Millisecond, true
}

// renewScales reports whether t's renew interval is TTL/5, as WithDefaults
// sets it when none is given: then it changes with the ttl.
func renewScales(t elector.Timing) bool { return t.RenewInterval == t.TTL/5 }

// withTTL is t with ttl instead of t.TTL, and the renew interval scaled
// with it if renewScales(t).
func withTTL(t elector.Timing, ttl time.Duration) elector.Timing {
	if renewScales(t) {
		t.RenewInterval = ttl / 5
	}
	t.TTL = ttl
	return t
}

// stopTimer fires when the child must start stopping to be gone before the
// term's deadline. When it fires, due reports whether the moment has really
// come, and re-arms it for the later moment earned by renewals if not.
type stopTimer struct {
	clk         clock.Clock
	term        *elector.Term
	stopTimeout time.Duration
	t           clock.Timer
}

// newStopTimer arms the stop-by timer of term, on clk, for a child that
// may take stopTimeout to stop.
func newStopTimer(clk clock.Clock, term *elector.Term, stopTimeout time.Duration) *stopTimer {
	st := &stopTimer{clk: clk, term: term, stopTimeout: stopTimeout}
	st.arm()
	return st
}

// at is the stop-by moment on the monotonic clock.
func (st *stopTimer) at() time.Time {
	return StopBy(st.term.ValidUntil(), st.stopTimeout)
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
