package elector

import (
	"fmt"
	"sync"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/internal/backoff"
)

// Defaults for Timing.
const (
	DefaultTTL     = 15 * time.Second
	DefaultDrift   = 0.01
	DefaultEpsilon = 10 * time.Millisecond
)

// Timing is the lease timing of a candidate.
type Timing struct {
	// TTL is the lease length the store enforces.
	TTL time.Duration
	// RenewInterval is the time between renewals; 0 means TTL/5.
	RenewInterval time.Duration
	// Drift is the allowed relative difference between the rates of this
	// host's clock and the store's, e.g. 0.01 for 1 %; 0 means DefaultDrift.
	Drift float64
	// Epsilon is a fixed allowance subtracted from every deadline; 0 means
	// DefaultEpsilon, negative means none.
	Epsilon time.Duration
	// Lag is how much older than its own request the evidence a renewal's
	// deadline counts from may be when the renewal completes; the backend
	// sets it on a term's timing, never the operator. It is 0 where the
	// deadline counts from the renewal's own request (etcd, Redis,
	// Kubernetes); on ZooKeeper a renewal counts from a request sent at
	// least lag before its Sync (elector/zk). The room for a missed
	// renewal (Validate) and the supervisor's stop budget leave room for it.
	Lag time.Duration
}

// WithDefaults fills in the zero fields.
func (t Timing) WithDefaults() Timing {
	if t.TTL == 0 {
		t.TTL = DefaultTTL
	}
	if t.RenewInterval == 0 {
		t.RenewInterval = t.TTL / 5
	}
	if t.Drift == 0 {
		t.Drift = DefaultDrift
	}
	if t.Epsilon == 0 {
		t.Epsilon = DefaultEpsilon
	} else if t.Epsilon < 0 {
		t.Epsilon = 0
	}
	return t
}

// Window is how long after a renewal's send time the lease is guaranteed
// locally: TTL·(1 − Drift) − Epsilon.
func (t Timing) Window() time.Duration {
	return time.Duration(float64(t.TTL)*(1-t.Drift)) - t.Epsilon
}

// DeadlineAfter is the local deadline earned by a renewal sent at sent.
func (t Timing) DeadlineAfter(sent time.Time) time.Time { return sent.Add(t.Window()) }

// MinRenewInterval is the shortest renewal interval Validate accepts.
const MinRenewInterval = 10 * time.Millisecond

// Validate refuses timing that cannot keep the safety rule. Call it on the
// result of WithDefaults. Field names match the CLI flags.
func (t Timing) Validate() error {
	switch {
	case t.TTL <= 0:
		return Configf("ttl", "must be positive, got %s", t.TTL)
	case t.TTL < 100*time.Millisecond:
		return Configf("ttl", "must be at least 100ms, got %s", t.TTL)
	case t.Drift < 0 || t.Drift >= 0.5:
		return Configf("drift", "must be in [0, 0.5), got %g", t.Drift)
	case t.RenewInterval <= 0:
		return Configf("renew-interval", "must be positive, got %s", t.RenewInterval)
	case t.RenewInterval < MinRenewInterval:
		return Configf("renew-interval", "must be at least %s (every renewal is a store request, and a failed one is retried up to four times per interval), got %s", MinRenewInterval, t.RenewInterval)
	case t.Lag < 0:
		return Configf("lag", "must not be negative, got %s (the backend sets it)", t.Lag)
	case t.Window() <= 0:
		return Configf("ttl", "%s leaves no guaranteed window after drift %g and epsilon %s", t.TTL, t.Drift, t.Epsilon)
	}
	// One renewal may be lost: the one after it must still land before the
	// deadline earned by the last acknowledged one.
	if t.Lag > 0 && 2*t.RenewInterval+t.Lag >= t.Window() {
		return Configf("renew-interval", "%s leaves no room for a missed renewal: two intervals and the store's renewal lag %s (%s) must be shorter than the guaranteed window %s (ttl %s less drift and epsilon); use at most %s",
			t.RenewInterval, t.Lag, 2*t.RenewInterval+t.Lag, t.Window(), t.TTL, ((t.Window()-t.Lag)/2 - time.Millisecond).Round(time.Millisecond))
	}
	if 2*t.RenewInterval >= t.Window() {
		return Configf("renew-interval", "%s leaves no room for a missed renewal: two intervals (%s) must be shorter than the guaranteed window %s (ttl %s less drift and epsilon); use at most %s",
			t.RenewInterval, 2*t.RenewInterval, t.Window(), t.TTL, (t.Window()/2 - time.Millisecond).Round(time.Millisecond))
	}
	return nil
}

// Checked is t with its defaults filled in (WithDefaults), or the rule it
// breaks (Validate): the one check of a timing, which Candidate.Validate,
// the CLI and the supervisor (on each term, before its child starts) all
// make.
func (t Timing) Checked() (Timing, error) {
	t = t.WithDefaults()
	return t, t.Validate()
}

// CheckedAsSet is Checked for a timing given explicitly, as by the CLI's
// flags: TTL always, RenewInterval if renewSet. A zero given there is
// refused rather than taken for the default.
func (t Timing) CheckedAsSet(renewSet bool) (Timing, error) {
	if t.TTL <= 0 {
		return t, Configf("ttl", "must be positive, got %s", t.TTL)
	}
	if renewSet && t.RenewInterval <= 0 {
		return t, Configf("renew-interval", "must be positive, got %s", t.RenewInterval)
	}
	return t.Checked()
}

// The store requests' pace, for the backends (t after WithDefaults).

// CleanupTimeout bounds leaving the store (removing a candidate's entry or
// lease) after a campaign or term ended: two renewal intervals, at least
// 500 ms, at most the TTL.
func (t Timing) CleanupTimeout() time.Duration {
	return min(max(2*t.RenewInterval, 500*time.Millisecond), t.TTL)
}

// WaitBackoff is the backoff of a waiting candidate's requests
// (backoff.Waiting).
func (t Timing) WaitBackoff() *backoff.Backoff { return backoff.Waiting(t.RenewInterval) }

// RenewBackoff is the backoff of a leader's renewals (backoff.Renewing).
func (t Timing) RenewBackoff() *backoff.Backoff { return backoff.Renewing(t.RenewInterval) }

// Timing is the timing the term's deadline runs on: the candidate's, with
// its defaults filled in.
func (t *Term) Timing() Timing { return t.dl.timing }

// String renders the timing for logs.
func (t Timing) String() string {
	s := fmt.Sprintf("ttl=%s renew=%s drift=%g epsilon=%s window=%s", t.TTL, t.RenewInterval, t.Drift, t.Epsilon, t.Window())
	if t.Lag > 0 {
		s += " lag=" + t.Lag.String()
	}
	return s
}

// Deadline tracks a lease's conservative local deadline. It only moves
// forward, and ends (closing Done) when the deadline passes without a
// renewal or when End is called, whichever is first.
type Deadline struct {
	clk    clock.Clock
	timing Timing

	suspended0 time.Duration // clk.Suspended() when the deadline was first computed

	mu    sync.Mutex
	until time.Time
	timer clock.Timer
	err   error
	done  chan struct{}
	hooks []func()
	ins   Instrument // told of every renewal that counts; nil: nobody
}

// NewDeadline starts tracking a lease whose grant (or first renewal) was
// sent at sent.
func NewDeadline(clk clock.Clock, t Timing, sent time.Time) *Deadline {
	d := &Deadline{clk: clock.OrReal(clk), timing: t, done: make(chan struct{})}
	d.suspended0 = d.clk.Suspended()
	d.until = t.DeadlineAfter(sent)
	d.arm()
	return d
}

// ReportTo has d report every renewal that counts from now on to in
// (Instrument.Renewed, with the time from its send), and returns d.
func (d *Deadline) ReportTo(in Instrument) *Deadline {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ins = in
	return d
}

// arm schedules the expiry check at d.until; d.mu held or not yet shared.
func (d *Deadline) arm() {
	wait := d.until.Sub(d.clk.Now())
	if wait < 0 {
		wait = 0
	}
	d.timer = d.clk.AfterFunc(wait, d.check)
}

func (d *Deadline) check() {
	d.mu.Lock()
	if d.err != nil {
		d.mu.Unlock()
		return
	}
	if d.clk.Now().Before(d.until) { // renewed meanwhile: wait for the new deadline
		d.arm()
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	d.End(ErrLeaseExpired)
}

// Suspended is how long the host has been suspended since the deadline
// was first computed (see clock.Clock.Suspended). The deadline is a reading
// of the monotonic clock, which stops during a suspension while the lease on
// the store runs on: after one, it is later than the truth by about this
// much.
func (d *Deadline) Suspended() time.Duration { return d.clk.Suspended() - d.suspended0 }

// Renewed records a renewal acknowledged by the store that was sent at
// sent. It returns the (possibly unchanged) deadline and false if the
// deadline has already ended: a late acknowledgement never revives it.
func (d *Deadline) Renewed(sent time.Time) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.until, false
	}
	now := d.clk.Now()
	if !now.Before(d.until) {
		// The deadline has passed even if the timer has not run yet.
		return d.until, false
	}
	if next := d.timing.DeadlineAfter(sent); next.After(d.until) {
		d.until = next
	}
	if d.ins != nil {
		d.ins.Renewed(now.Sub(sent))
	}
	return d.until, true
}

// ValidUntil returns the current deadline.
func (d *Deadline) ValidUntil() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.until
}

// Done is closed once the deadline has ended.
func (d *Deadline) Done() <-chan struct{} { return d.done }

// Err is nil while the deadline holds, then the reason it ended.
func (d *Deadline) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// OnEnd registers f to run (in its own goroutine-free call, once) when the
// deadline ends; if it has already ended f runs at once.
func (d *Deadline) OnEnd(f func()) {
	d.mu.Lock()
	if d.err == nil {
		d.hooks = append(d.hooks, f)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	f()
}

// End ends the deadline with err (the first call wins) and reports whether
// this call ended it.
func (d *Deadline) End(err error) bool {
	d.mu.Lock()
	if d.err != nil {
		d.mu.Unlock()
		return false
	}
	d.err = err
	if d.timer != nil {
		d.timer.Stop()
	}
	// Never report a deadline later than the moment it ended.
	if now := d.clk.Now(); now.Before(d.until) {
		d.until = now
	}
	hooks := d.hooks
	d.hooks = nil
	close(d.done)
	d.mu.Unlock()
	for _, f := range hooks {
		f()
	}
	return true
}
