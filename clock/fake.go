package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a manually advanced clock for tests. Timers fire, in deadline
// order, during Advance; AfterFunc callbacks run synchronously inside Advance.
// Suspend models a host that sleeps: Now stands still, boot timers fire.
type Fake struct {
	mu        sync.Mutex
	now       time.Time
	suspended time.Duration
	timers    []*fakeTimer
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc schedules fn to run when the clock has been advanced by d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer { return f.add(d, fn, nil, false) }

// NewTimer returns a timer firing when the clock has been advanced by d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.add(d, nil, make(chan time.Time, 1), false)
}

// NewBootTimer returns a timer firing when the clock has been advanced or
// suspended by d in all.
func (f *Fake) NewBootTimer(d time.Duration) Timer {
	return f.add(d, nil, make(chan time.Time, 1), true)
}

// Suspended is the total of every Suspend so far.
func (f *Fake) Suspended() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.suspended
}

// Pending reports how many timers are armed.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Advance moves the clock forward by d, firing every timer that falls due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.fireUntil(f.now.Add(d))
	f.mu.Unlock()
}

// Suspend models a host suspended for d: Now does not move and ordinary
// timers keep waiting, while boot timers count d and fire if it brings them
// due.
func (f *Fake) Suspend(d time.Duration) {
	f.mu.Lock()
	f.suspended += d
	f.fireUntil(f.now)
	f.mu.Unlock()
}

// fireUntil fires, in order, every timer due by the monotonic time target
// and leaves Now at target. It is called with f.mu held and releases it
// around each firing.
func (f *Fake) fireUntil(target time.Time) {
	for {
		sort.Slice(f.timers, func(i, j int) bool { return f.key(f.timers[i]).Before(f.key(f.timers[j])) })
		if len(f.timers) == 0 || f.key(f.timers[0]).After(target) {
			break
		}
		t := f.timers[0]
		f.timers = f.timers[1:]
		if at := f.key(t); at.After(f.now) {
			f.now = at
		}
		now := f.now
		f.mu.Unlock()
		if t.fn != nil {
			t.fn()
		} else {
			t.ch <- now
		}
		f.mu.Lock()
	}
	f.now = target
}

// key is when t falls due on the monotonic timeline: a boot timer's deadline
// comes earlier by every suspension since it was armed.
func (f *Fake) key(t *fakeTimer) time.Time {
	if t.boot {
		return t.at.Add(-(f.suspended - t.suspendedAt))
	}
	return t.at
}

func (f *Fake) add(d time.Duration, fn func(), ch chan time.Time, boot bool) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), fn: fn, ch: ch, boot: boot, suspendedAt: f.suspended}
	f.timers = append(f.timers, t)
	return t
}

type fakeTimer struct {
	f           *Fake
	at          time.Time
	fn          func()
	ch          chan time.Time
	boot        bool          // counts suspended time (NewBootTimer)
	suspendedAt time.Duration // f.suspended when armed
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, o := range t.f.timers {
		if o == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			return true
		}
	}
	return false
}
