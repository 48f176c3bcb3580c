package elector_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

func TestTimingValidate(t *testing.T) {
	tests := []struct {
		name    string
		timing  elector.Timing
		field   string // "" = valid
		message string
	}{
		{name: "defaults", timing: elector.Timing{}},
		{name: "two seconds", timing: elector.Timing{TTL: 2 * time.Second}},
		{name: "negative ttl", timing: elector.Timing{TTL: -time.Second}, field: "ttl", message: "must be positive"},
		{name: "tiny ttl", timing: elector.Timing{TTL: 50 * time.Millisecond}, field: "ttl", message: "at least 100ms"},
		{name: "drift too large", timing: elector.Timing{TTL: time.Second, Drift: 0.6}, field: "drift", message: "[0, 0.5)"},
		{name: "negative renew", timing: elector.Timing{TTL: time.Second, RenewInterval: -1}, field: "renew-interval", message: "must be positive"},
		{name: "renew in nanoseconds", timing: elector.Timing{TTL: time.Second, RenewInterval: 3}, field: "renew-interval", message: "at least 10ms"},
		{name: "renew at the minimum", timing: elector.Timing{TTL: time.Second, RenewInterval: elector.MinRenewInterval}},
		{name: "no room for a missed renewal", timing: elector.Timing{TTL: 10 * time.Second, RenewInterval: 5 * time.Second},
			field: "renew-interval", message: "leaves no room for a missed renewal"},
		// ttl 2s: window 1.97s; two intervals (800ms) fit it, not with a lag of 1.2s.
		{name: "renewal lag fits", timing: elector.Timing{TTL: 2 * time.Second, Lag: time.Second}},
		{name: "no room for a missed renewal and the lag", timing: elector.Timing{TTL: 2 * time.Second, Lag: 1200 * time.Millisecond},
			field: "renew-interval", message: "the store's renewal lag 1.2s"},
		{name: "negative lag", timing: elector.Timing{TTL: 2 * time.Second, Lag: -1}, field: "lag", message: "must not be negative"},
		{name: "epsilon eats the window", timing: elector.Timing{TTL: 100 * time.Millisecond, Epsilon: time.Second}, field: "ttl", message: "no guaranteed window"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.timing.WithDefaults().Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *elector.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate() = %v, want *ConfigError", err)
			}
			if ce.Field != tc.field || !strings.Contains(ce.Reason, tc.message) {
				t.Fatalf("Validate() = field %q reason %q, want field %q containing %q", ce.Field, ce.Reason, tc.field, tc.message)
			}
		})
	}
}

func TestWindow(t *testing.T) {
	tests := []struct {
		name   string
		timing elector.Timing
		want   time.Duration
	}{
		{name: "default 15s", timing: elector.Timing{}, want: 15*time.Second - 150*time.Millisecond - 10*time.Millisecond},
		{name: "2s", timing: elector.Timing{TTL: 2 * time.Second}, want: 2*time.Second - 20*time.Millisecond - 10*time.Millisecond},
		{name: "no epsilon", timing: elector.Timing{TTL: time.Second, Epsilon: -1}, want: 990 * time.Millisecond},
		{name: "5% drift", timing: elector.Timing{TTL: 10 * time.Second, Drift: 0.05}, want: 9500*time.Millisecond - 10*time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.timing.WithDefaults().Window(); got != tc.want {
				t.Fatalf("Window() = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestDeadline drives the deadline with a fake clock: it only moves forward,
// from send times, and ends exactly when it passes without renewal.
func TestDeadline(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	tm := elector.Timing{TTL: 10 * time.Second}.WithDefaults() // window 9.89s
	window := tm.Window()

	t.Run("renewal moves it from the send time", func(t *testing.T) {
		clk := clock.NewFake(start)
		d := elector.NewDeadline(clk, tm, start)
		if got := d.ValidUntil(); !got.Equal(start.Add(window)) {
			t.Fatalf("initial ValidUntil = %v, want start+%s", got.Sub(start), window)
		}
		clk.Advance(2 * time.Second)
		sent := clk.Now()
		clk.Advance(500 * time.Millisecond) // the ack arrives later; it must not count
		until, ok := d.Renewed(sent)
		if !ok || !until.Equal(sent.Add(window)) {
			t.Fatalf("Renewed = %v, %v; want sent+window", until.Sub(start), ok)
		}
	})
	t.Run("an older ack never moves it back", func(t *testing.T) {
		clk := clock.NewFake(start)
		d := elector.NewDeadline(clk, tm, start)
		clk.Advance(3 * time.Second)
		d.Renewed(clk.Now())
		before := d.ValidUntil()
		d.Renewed(start.Add(time.Second)) // a late ack of an earlier renewal
		if !d.ValidUntil().Equal(before) {
			t.Fatalf("ValidUntil moved back from %v to %v", before.Sub(start), d.ValidUntil().Sub(start))
		}
	})
	t.Run("expires exactly at the deadline", func(t *testing.T) {
		clk := clock.NewFake(start)
		d := elector.NewDeadline(clk, tm, start)
		clk.Advance(window - time.Nanosecond)
		select {
		case <-d.Done():
			t.Fatalf("done 1ns early: %v", d.Err())
		default:
		}
		clk.Advance(time.Nanosecond)
		select {
		case <-d.Done():
		default:
			t.Fatal("not done at the deadline")
		}
		if !errors.Is(d.Err(), elector.ErrLeaseExpired) {
			t.Fatalf("Err() = %v, want ErrLeaseExpired", d.Err())
		}
	})
	t.Run("renewals keep it alive", func(t *testing.T) {
		clk := clock.NewFake(start)
		d := elector.NewDeadline(clk, tm, start)
		for range 20 {
			clk.Advance(tm.RenewInterval)
			if _, ok := d.Renewed(clk.Now()); !ok {
				t.Fatalf("renewal refused: %v", d.Err())
			}
		}
		if d.Err() != nil {
			t.Fatalf("ended despite renewals: %v", d.Err())
		}
		clk.Advance(window)
		if !errors.Is(d.Err(), elector.ErrLeaseExpired) {
			t.Fatalf("Err() = %v after a silent window, want ErrLeaseExpired", d.Err())
		}
	})
	t.Run("a late ack does not revive it", func(t *testing.T) {
		clk := clock.NewFake(start)
		var rep reported
		d := elector.NewDeadline(clk, tm, start).ReportTo(&rep)
		sent := start.Add(time.Second)
		clk.Advance(window + time.Second)
		if _, ok := d.Renewed(sent); ok {
			t.Fatal("a renewal acknowledged after the deadline revived it")
		}
		if len(rep.took) != 0 {
			t.Fatalf("a renewal that did not count was reported: %v", rep.took)
		}
	})
	t.Run("renewals that count are reported with their time from the send", func(t *testing.T) {
		clk := clock.NewFake(start)
		var rep reported
		d := elector.NewDeadline(clk, tm, start).ReportTo(&rep)
		clk.Advance(2 * time.Second)
		sent := clk.Now()
		clk.Advance(30 * time.Millisecond)
		d.Renewed(sent)
		d.Renewed(start) // counts (the deadline is ahead), moves nothing
		want := []time.Duration{30 * time.Millisecond, 2030 * time.Millisecond}
		if !slices.Equal(rep.took, want) {
			t.Fatalf("reported %v, want %v", rep.took, want)
		}
	})
	t.Run("end caps the deadline and runs hooks once", func(t *testing.T) {
		clk := clock.NewFake(start)
		d := elector.NewDeadline(clk, tm, start)
		calls := 0
		d.OnEnd(func() { calls++ })
		clk.Advance(time.Second)
		if !d.End(elector.ErrResigned) || d.End(elector.ErrClosed) {
			t.Fatal("End should succeed once")
		}
		if !errors.Is(d.Err(), elector.ErrResigned) || calls != 1 {
			t.Fatalf("Err() = %v, hook calls %d", d.Err(), calls)
		}
		if !d.ValidUntil().Equal(clk.Now()) {
			t.Fatalf("ValidUntil %v after End, want the end time", d.ValidUntil().Sub(start))
		}
		d.OnEnd(func() { calls++ })
		if calls != 2 {
			t.Fatal("OnEnd after the end must run at once")
		}
		if clk.Pending() != 0 {
			t.Fatalf("%d timers left armed", clk.Pending())
		}
	})
}

func TestLossReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{elector.ErrLeaseExpired, "deadline"},
		{elector.ErrLeaseLost, "lease_lost"},
		{elector.ErrLeadershipLost, "key_lost"},
		{elector.ErrResigned, "resigned"},
		{elector.ErrClosed, "closed"},
		{errors.New("x"), "other"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := elector.LossReason(tc.err); got != tc.want {
				t.Fatalf("LossReason(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// reported keeps what Renewed reports (one goroutine: no lock).
type reported struct {
	elector.NopInstrument
	took []time.Duration
}

func (r *reported) Renewed(took time.Duration) { r.took = append(r.took, took) }

func TestTimingCleanupTimeout(t *testing.T) {
	for _, tc := range []struct {
		timing elector.Timing
		want   time.Duration
	}{
		{elector.Timing{TTL: 15 * time.Second}, 6 * time.Second},              // two renewal intervals
		{elector.Timing{TTL: time.Second}, 500 * time.Millisecond},            // at least 500 ms
		{elector.Timing{TTL: 300 * time.Millisecond}, 300 * time.Millisecond}, // at most the TTL
	} {
		if got := tc.timing.WithDefaults().CleanupTimeout(); got != tc.want {
			t.Errorf("%s: CleanupTimeout = %s, want %s", tc.timing.WithDefaults(), got, tc.want)
		}
	}
}
