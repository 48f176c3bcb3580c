package supervisor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

func TestStopBy(t *testing.T) {
	v := time.Unix(100, 0)
	if got, want := StopBy(v, 5*time.Second), v.Add(-5*time.Second-StopMargin); !got.Equal(want) {
		t.Fatalf("StopBy = %v, want %v", got, want)
	}
}

func TestDefaultStopTimeout(t *testing.T) {
	tests := []struct {
		name   string
		timing elector.Timing
		want   time.Duration
	}{
		{name: "default ttl", timing: elector.Timing{TTL: 15 * time.Second}, want: 5 * time.Second},
		{name: "2s", timing: elector.Timing{TTL: 2 * time.Second}, want: 485 * time.Millisecond},
		// 300ms·0.99 − 10ms − 2×43ms − 200ms = 1ms, whose half would round
		// up to all of it.
		{name: "budget of 1ms", timing: elector.Timing{TTL: 300 * time.Millisecond, RenewInterval: 43 * time.Millisecond}, want: 0},
		{name: "no budget", timing: elector.Timing{TTL: 100 * time.Millisecond}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tm := tc.timing.WithDefaults()
			got := DefaultStopTimeout(tm)
			if got != tc.want {
				t.Fatalf("DefaultStopTimeout(%s) = %s, want %s", tm, got, tc.want)
			}
			if stopBudget(tm) <= 0 {
				return
			}
			if st, err := StopTimeout(tm, 0, false); err != nil || st != got {
				t.Fatalf("StopTimeout(%s, unset) = %s, %v; want the default %s accepted", tm, st, err, got)
			}
		})
	}
}

// TestStopTimeout: the one check of the stop rule, the stop timeouts it
// picks and refuses, and that a ttl it names as the shortest workable one is
// exactly that (it works, a millisecond less does not).
func TestStopTimeout(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name   string
		timing elector.Timing // as configured: RenewInterval 0 is ttl/5
		asked  time.Duration
		set    bool
		want   time.Duration // when accepted
		field  string        // "" = accepted
		says   []string
		minTTL time.Duration // the shortest ttl the refusal names; 0: none
	}{
		{name: "default ttl, unset", timing: elector.Timing{TTL: 15 * time.Second}, want: 5 * time.Second},
		{name: "2s, unset", timing: elector.Timing{TTL: 2 * time.Second}, want: 485 * ms},
		{name: "set and fits", timing: elector.Timing{TTL: 15 * time.Second}, asked: 5 * time.Second, set: true, want: 5 * time.Second},
		{name: "set to zero", timing: elector.Timing{TTL: 2 * time.Second}, asked: 0, set: true, want: 0},
		// window 14.84s − 2×3s − 200ms: the budget is 8.64s.
		{name: "just below the budget", timing: elector.Timing{TTL: 15 * time.Second}, asked: 8639 * ms, set: true, want: 8639 * ms},
		{name: "at the budget", timing: elector.Timing{TTL: 15 * time.Second}, asked: 8640 * ms, set: true,
			field: "stop-timeout", says: []string{"use a stop-timeout below 8.64s or a ttl of at least 15.001s (renew-interval ttl/5)"}, minTTL: 15001 * ms},
		{name: "longer than the ttl", timing: elector.Timing{TTL: 15 * time.Second}, asked: 20 * time.Second, set: true,
			field: "stop-timeout", says: []string{"20s is too long for ttl 15s", "below 8.64s or a ttl of at least 34.255s"}, minTTL: 34255 * ms},
		{name: "explicit renew-interval is kept", timing: elector.Timing{TTL: 2 * time.Second, RenewInterval: 100 * ms}, asked: 2 * time.Second, set: true,
			field: "stop-timeout", says: []string{"below 1.57s or a ttl of at least 2.435s (keeping renew-interval 100ms)"}, minTTL: 2435 * ms},
		{name: "negative", timing: elector.Timing{TTL: 15 * time.Second}, asked: -time.Second, set: true,
			field: "stop-timeout", says: []string{"must not be negative, got -1s"}},
		// 100ms·0.99 − 10ms = 89ms < 2×20ms + 200ms: no stop timeout fits.
		{name: "ttl 100ms, unset", timing: elector.Timing{TTL: 100 * ms},
			field: "ttl", says: []string{"100ms is too short to stop the child in time", "guaranteed for 89ms", "(2×20ms)",
				"use a ttl of at least 356ms (renew-interval ttl/5), where the default stop-timeout is 0s"}, minTTL: 356 * ms},
		{name: "ttl 100ms, renew-interval 10ms, unset", timing: elector.Timing{TTL: 100 * ms, RenewInterval: 10 * ms},
			field: "ttl", says: []string{"(2×10ms)", "use a ttl of at least 233ms (keeping renew-interval 10ms)"}, minTTL: 233 * ms},
		{name: "ttl 100ms, stop-timeout 0 set", timing: elector.Timing{TTL: 100 * ms}, asked: 0, set: true,
			field: "ttl", says: []string{"use a ttl of at least 356ms for stop-timeout 0s (renew-interval ttl/5)"}, minTTL: 356 * ms},
		{name: "ttl 100ms, stop-timeout 10s set", timing: elector.Timing{TTL: 100 * ms}, asked: 10 * time.Second, set: true,
			field: "ttl", says: []string{"use a ttl of at least 17.306s for stop-timeout 10s"}, minTTL: 17306 * ms},
		{name: "no ttl is long enough", timing: elector.Timing{TTL: 100 * ms}, asked: 1 << 62, set: true,
			field: "ttl", says: []string{"no ttl leaves room for stop-timeout", "use a shorter stop-timeout"}},
		// Twice the renew interval overflows for shorter ttls.
		{name: "no ttl keeps a renew-interval this long", timing: elector.Timing{TTL: 2562047 * time.Hour, RenewInterval: 2000000 * time.Hour}, asked: time.Second, set: true,
			field: "ttl", says: []string{"no ttl leaves room for stop-timeout 1s with renew-interval 2000000h0m0s: use a shorter stop-timeout or renew-interval"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StopTimeout(tc.timing.WithDefaults(), tc.asked, tc.set)
			if tc.field == "" {
				if err != nil || got != tc.want {
					t.Fatalf("StopTimeout = %s, %v; want %s", got, err, tc.want)
				}
				return
			}
			var ce *elector.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("StopTimeout = %s, %v; want a ConfigError on %s", got, err, tc.field)
			}
			for _, s := range tc.says {
				if !strings.Contains(ce.Reason, s) {
					t.Errorf("reason %q does not say %q", ce.Reason, s)
				}
			}
			if strings.Contains(ce.Reason, "below -") {
				t.Errorf("reason %q asks for a negative stop-timeout", ce.Reason)
			}
			if tc.minTTL == 0 {
				return
			}
			// As an operator would: the same flags with the ttl changed.
			with := func(ttl time.Duration) error {
				tm := tc.timing
				tm.TTL = ttl
				tm = tm.WithDefaults()
				if err := tm.Validate(); err != nil {
					return err
				}
				_, err := StopTimeout(tm, tc.asked, tc.set)
				return err
			}
			if err := with(tc.minTTL); err != nil {
				t.Errorf("the ttl named, %s, is refused: %v", tc.minTTL, err)
			}
			if with(tc.minTTL-ms) == nil {
				t.Errorf("ttl %s is accepted too: %s is not the shortest", tc.minTTL-ms, tc.minTTL)
			}
		})
	}
}

// TestTermTimingRefused: the stop timeout meets the timing where the
// supervisor gets a term (checkTerm). A term whose timing leaves no room
// for StopTimeout is given up before any child starts under it, and Run
// (or RunOnce) ends with an error that names the flag to change.
func TestTermTimingRefused(t *testing.T) {
	tests := []struct {
		name        string
		timing      elector.Timing // the term's, as the elector has it
		stopTimeout time.Duration
		isDefault   bool   // StopTimeoutDefault
		field       string // "": the term fits and is held
	}{
		{name: "fits", timing: elector.Timing{TTL: 2 * time.Second}, stopTimeout: 400 * time.Millisecond},
		{name: "stop-timeout too long for ttl", timing: elector.Timing{TTL: 2 * time.Second}, stopTimeout: 2 * time.Second, field: "stop-timeout"},
		{name: "ttl too short for any stop-timeout", timing: elector.Timing{TTL: 100 * time.Millisecond}, field: "ttl"},
		{name: "bad renew interval", timing: elector.Timing{TTL: 2 * time.Second, RenewInterval: time.Second}, stopTimeout: 400 * time.Millisecond, field: "renew-interval"},
		// 900ms fits ttl 2s (budget 970ms), not with a renewal lag of 400ms (570ms).
		{name: "renewal lag takes the room", timing: elector.Timing{TTL: 2 * time.Second, Lag: 400 * time.Millisecond}, stopTimeout: 900 * time.Millisecond, field: "stop-timeout"},
		{name: "default gives way to the lag", timing: elector.Timing{TTL: 2 * time.Second, Lag: 400 * time.Millisecond}, stopTimeout: 900 * time.Millisecond, isDefault: true},
		{name: "renewal lag leaves no room", timing: elector.Timing{TTL: 2 * time.Second, Lag: 1100 * time.Millisecond}, stopTimeout: 100 * time.Millisecond, isDefault: true, field: "ttl"},
	}
	refused := func(t *testing.T, err error, field string) {
		t.Helper()
		var ce *elector.ConfigError
		if !errors.As(err, &ce) || ce.Field != field {
			t.Fatalf("got %v, want a ConfigError on %s", err, field)
		}
		if !strings.Contains(err.Error(), "--stop-timeout") || !strings.Contains(err.Error(), "--ttl") {
			t.Errorf("%q does not name --stop-timeout and --ttl", err)
		}
	}
	for _, tc := range tests {
		t.Run("Run/"+tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				c.Command, c.Containment, c.StopTimeout = []string{"sleep", "1000"}, ContainPgroup, tc.stopTimeout
				c.StopTimeoutDefault = tc.isDefault
			})
			h.timing = tc.timing.WithDefaults()
			h.grant(60)
			if tc.field == "" {
				waitFor(t, "child started", func() bool { return h.ev.has("child_started") })
				return
			}
			err := h.runReturned(t, 10*time.Second, "Run did not end on a term whose timing does not fit")
			refused(t, err, tc.field)
			select {
			case <-h.resigns:
			default:
				t.Error("the refused term was not resigned")
			}
			if h.ev.has("child_started") || !h.ev.has("lost:"+endRefused) {
				t.Errorf("child started %v, lost:%s %v; want no child and the refusal recorded",
					h.ev.has("child_started"), endRefused, h.ev.has("lost:"+endRefused))
			}
			var ce *elector.ConfigError
			if err := h.sup.Live(); !errors.As(err, &ce) {
				t.Errorf("Live = %v after the refusal, want it", err)
			}
		})
		if tc.field == "" {
			continue // RunOnce under a term that fits: TestRunOnce
		}
		t.Run("RunOnce/"+tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			resigned := false
			term := elector.NewTerm(elector.Leader{ID: "me", Token: 61, Since: clk.Now()},
				elector.NewDeadline(clk, tc.timing.WithDefaults(), clk.Now()),
				func(context.Context) error { resigned = true; return nil })
			sup, err := New(Config{Elector: &fakeElector{}, Election: "e", ID: "me", Command: []string{"sleep", "1000"},
				Containment: ContainPgroup, StopTimeout: tc.stopTimeout, StopTimeoutDefault: tc.isDefault, Clock: clk})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a refusal is at once
			defer cancel()
			ran := false
			err = sup.RunOnce(ctx, term, func(context.Context, ExitStatus) { ran = true })
			refused(t, err, tc.field)
			if !resigned || ran || sup.Child() != nil {
				t.Errorf("resigned %v, afterExit ran %v, child %v; want resigned only", resigned, ran, sup.Child())
			}
		})
	}
}

// TestCheckTermStop: the stop timeout a term runs with. One the operator
// set is kept or refused; the default gives way to the term's own default
// when the term's timing (a negotiated lease, a renewal lag) leaves less
// room than the configured one.
func TestCheckTermStop(t *testing.T) {
	tests := []struct {
		name      string
		timing    elector.Timing
		stop      time.Duration
		isDefault bool
		want      time.Duration // -1: refused
	}{
		{name: "set, fits", timing: elector.Timing{TTL: 15 * time.Second}, stop: 5 * time.Second, want: 5 * time.Second},
		{name: "default, fits", timing: elector.Timing{TTL: 15 * time.Second}, stop: 5 * time.Second, isDefault: true, want: 5 * time.Second},
		// ttl 10s: budget 9.89s − 4s − 200ms = 5.69s; a lag of 1.52s (a 2s tick) leaves 4.17s.
		{name: "set, lag", timing: elector.Timing{TTL: 10 * time.Second, Lag: 1520 * time.Millisecond}, stop: 5 * time.Second, want: -1},
		{name: "default, lag", timing: elector.Timing{TTL: 10 * time.Second, Lag: 1520 * time.Millisecond}, stop: 5 * time.Second, isDefault: true, want: 2085 * time.Millisecond},
		{name: "default, a shorter negotiated lease", timing: elector.Timing{TTL: 4 * time.Second}, stop: 5 * time.Second, isDefault: true, want: 1075 * time.Millisecond},
		{name: "default never grows", timing: elector.Timing{TTL: 60 * time.Second}, stop: 2 * time.Second, isDefault: true, want: 2 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			term := elector.NewTerm(elector.Leader{ID: "me", Token: 7, Since: clk.Now()},
				elector.NewDeadline(clk, tc.timing.WithDefaults(), clk.Now()), func(context.Context) error { return nil })
			got, err := checkTerm(term, tc.stop, tc.isDefault)
			switch {
			case tc.want < 0 && err == nil:
				t.Fatalf("checkTerm = %s, want a refusal", got)
			case tc.want >= 0 && err != nil:
				t.Fatalf("checkTerm: %v", err)
			case tc.want >= 0 && got != tc.want:
				t.Errorf("checkTerm = %s, want %s", got, tc.want)
			}
		})
	}
}
