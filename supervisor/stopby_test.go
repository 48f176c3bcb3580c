package supervisor

import (
	"errors"
	"strings"
	"testing"
	"time"

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
// picks and refuses.
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
	}{
		{name: "default ttl, unset", timing: elector.Timing{TTL: 15 * time.Second}, want: 5 * time.Second},
		{name: "2s, unset", timing: elector.Timing{TTL: 2 * time.Second}, want: 485 * ms},
		{name: "set and fits", timing: elector.Timing{TTL: 15 * time.Second}, asked: 5 * time.Second, set: true, want: 5 * time.Second},
		{name: "set to zero", timing: elector.Timing{TTL: 2 * time.Second}, asked: 0, set: true, want: 0},
		// window 14.84s − 2×3s − 200ms: the budget is 8.64s.
		{name: "just below the budget", timing: elector.Timing{TTL: 15 * time.Second}, asked: 8639 * ms, set: true, want: 8639 * ms},
		{name: "at the budget", timing: elector.Timing{TTL: 15 * time.Second}, asked: 8640 * ms, set: true,
			field: "stop-timeout", says: []string{"use a stop-timeout below 8.64s"}},
		{name: "longer than the ttl", timing: elector.Timing{TTL: 15 * time.Second}, asked: 20 * time.Second, set: true,
			field: "stop-timeout", says: []string{"20s is too long for ttl 15s", "below 8.64s"}},
		{name: "negative", timing: elector.Timing{TTL: 15 * time.Second}, asked: -time.Second, set: true,
			field: "stop-timeout", says: []string{"must not be negative, got -1s"}},
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
		})
	}
}
