package clock

import (
	"sort"
	"sync"
	"time"
)

// Fake is a manually advanced clock for tests. Timers fire, in deadline
// order, during Advance; AfterFunc callbacks run synchronously inside Advance.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
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
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer { return f.add(d, fn, nil) }

// NewTimer returns a timer firing when the clock has been advanced by d.
func (f *Fake) NewTimer(d time.Duration) Timer { return f.add(d, nil, make(chan time.Time, 1)) }

// Pending reports how many timers are armed.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Advance moves the clock forward by d, firing every timer that falls due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	for {
		sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
		if len(f.timers) == 0 || f.timers[0].at.After(target) {
			break
		}
		t := f.timers[0]
		f.timers = f.timers[1:]
		if t.at.After(f.now) {
			f.now = t.at
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
	f.mu.Unlock()
}

func (f *Fake) add(d time.Duration, fn func(), ch chan time.Time) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), fn: fn, ch: ch}
	f.timers = append(f.timers, t)
	return t
}

type fakeTimer struct {
	f  *Fake
	at time.Time
	fn func()
	ch chan time.Time
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
