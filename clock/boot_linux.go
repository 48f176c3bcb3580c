package clock

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Suspended returns CLOCK_BOOTTIME − CLOCK_MONOTONIC: how long the host has
// been suspended since it booted. The two clocks advance together except
// while the host sleeps, when only CLOCK_BOOTTIME runs on; Go's monotonic
// readings (and so Now and every timer of the time package) are
// CLOCK_MONOTONIC.
//
// The two clocks are read one after the other, and a thread descheduled
// between the two reads would see the time it waited as a suspension
// (an adversarial review saw 77–227 ms from a process stopped for 80 ms at
// a time, more than SuspendBound: a false suspension SIGKILLs a tree in
// its stop grace). So CLOCK_MONOTONIC is read on both sides of
// CLOCK_BOOTTIME, and a reading whose two sides are more than
// suspendReadSpread apart is taken again. If every try is that wide, the
// last one's upper bound counts: a suspension is never read short.
func (Real) Suspended() time.Duration {
	var d time.Duration
	for range suspendReadTries {
		var mono1, boot, mono2 unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono1) != nil ||
			unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil ||
			unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono2) != nil {
			return 0 // not reachable on Linux ≥ 2.6.39; no reading means no suspension seen
		}
		// boot was read between mono1 and mono2: boot − mono1 is the
		// suspension, plus whatever wait came between those two reads.
		d = time.Duration(boot.Nano() - mono1.Nano())
		if time.Duration(mono2.Nano()-mono1.Nano()) <= suspendReadSpread {
			break
		}
	}
	return d
}

const (
	// suspendReadSpread is the most two monotonic readings around the
	// boot clock's may differ for the reading to count at once: three
	// vDSO calls take well under a microsecond.
	suspendReadSpread = time.Millisecond
	// suspendReadTries bounds the readings taken while the thread keeps
	// being descheduled between them.
	suspendReadTries = 4
)

// NewBootTimer returns a timer that fires once d has passed on
// CLOCK_BOOTTIME, counting time the host spent suspended: a timerfd, read
// through the runtime's poller. If the kernel refuses a timerfd it falls
// back to a monotonic timer, which may fire late by the time the host slept;
// callers that compare Suspended on every wake still see the suspension.
func (Real) NewBootTimer(d time.Duration) Timer {
	t, err := newBootTimer(d)
	if err != nil {
		return realTimer{t: time.NewTimer(d)}
	}
	return t
}

type bootTimer struct {
	f     *os.File
	c     chan time.Time
	fired atomic.Bool
	once  sync.Once
}

func newBootTimer(d time.Duration) (*bootTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	// A zero it_value disarms a timerfd: fire at once as 1 ns.
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("timerfd_settime: %w", err)
	}
	t := &bootTimer{f: os.NewFile(uintptr(fd), "boottime-timer"), c: make(chan time.Time, 1)}
	go t.wait()
	return t, nil
}

// wait is the timer's own goroutine: it ends when the timer fires or Stop
// closes the descriptor.
func (t *bootTimer) wait() {
	var buf [8]byte
	for {
		_, err := t.f.Read(buf[:])
		if err == nil {
			t.fired.Store(true)
			t.c <- time.Now()
			return
		}
		if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			return // closed by Stop
		}
	}
}

func (t *bootTimer) C() <-chan time.Time { return t.c }

// Stop closes the timerfd; it reports whether the timer had not fired yet.
func (t *bootTimer) Stop() bool {
	stopped := false
	t.once.Do(func() {
		t.f.Close()
		stopped = !t.fired.Load()
	})
	return stopped
}

// Monotonic reads CLOCK_MONOTONIC. Unlike the monotonic readings inside a
// time.Time, which mean something only to the process that took them, it
// is one clock for every process of the host: a deadline computed here
// holds in a process this one starts (the pidns init checks it so).
func Monotonic() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0 // not reachable on Linux
	}
	return time.Duration(ts.Nano())
}
