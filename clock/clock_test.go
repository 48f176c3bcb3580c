package clock

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func fired(t Timer) bool {
	select {
	case <-t.C():
		return true
	default:
		return false
	}
}

func TestFakeSuspend(t *testing.T) {
	tests := []struct {
		name               string
		advance, suspend   time.Duration
		wantMono, wantBoot bool
	}{
		{name: "short suspend fires neither", suspend: 3 * time.Second},
		{name: "suspend past the deadline fires only the boot timer", suspend: 6 * time.Second, wantBoot: true},
		{name: "advance and suspend add up for the boot timer", advance: 3 * time.Second, suspend: 3 * time.Second, wantBoot: true},
		{name: "advance past the deadline fires both", advance: 5 * time.Second, wantMono: true, wantBoot: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			f := NewFake(start)
			mono, boot := f.NewTimer(5*time.Second), f.NewBootTimer(5*time.Second)
			f.Advance(tt.advance)
			f.Suspend(tt.suspend)
			if got := fired(mono); got != tt.wantMono {
				t.Errorf("monotonic timer fired = %v, want %v", got, tt.wantMono)
			}
			if got := fired(boot); got != tt.wantBoot {
				t.Errorf("boot timer fired = %v, want %v", got, tt.wantBoot)
			}
			if got := f.Now(); !got.Equal(start.Add(tt.advance)) {
				t.Errorf("Now = %v, want %v: a suspension must not move it", got, start.Add(tt.advance))
			}
			if f.Suspended() != tt.suspend {
				t.Errorf("Suspended = %v, want %v", f.Suspended(), tt.suspend)
			}
		})
	}
}

func TestRealBootTimer(t *testing.T) {
	var c Real
	if s := c.Suspended(); s < 0 {
		t.Fatalf("Suspended = %v, want ≥ 0", s)
	}
	tm := c.NewBootTimer(20 * time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatal("boot timer did not fire within 10 s")
	}
	if tm.Stop() {
		t.Error("Stop after firing reported a stopped timer")
	}
	tm = c.NewBootTimer(time.Hour)
	if !tm.Stop() {
		t.Error("Stop before firing reported a fired timer")
	}
	if fired(tm) {
		t.Error("a stopped timer fired")
	}
}

// TestRealBootTimerReleasesFd: a fired or stopped timer holds no descriptor
// once stopped (a term re-arms its stop timer on every renewal).
func TestRealBootTimerReleasesFd(t *testing.T) {
	fds := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	var c Real
	before := fds()
	for i := range 50 {
		tm := c.NewBootTimer(time.Duration(i%2) * time.Hour) // fires at once, or never
		if i%2 == 0 {
			<-tm.C()
		}
		tm.Stop()
	}
	if after := fds(); after > before {
		t.Fatalf("%d descriptors open after 50 stopped timers, %d before", after, before)
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), Real{}, 0); err != nil {
		t.Fatalf("Sleep(0) = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := NewFake(time.Unix(0, 0))
	if err := Sleep(ctx, f, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with ctx cancelled = %v, want context.Canceled", err)
	}
	if n := f.Pending(); n != 0 {
		t.Fatalf("%d timers armed after Sleep returned, want 0 (stopped)", n)
	}
}
