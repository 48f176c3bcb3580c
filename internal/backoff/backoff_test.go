package backoff

import (
	"math"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	tests := []struct {
		name      string
		base, cap time.Duration
		want      []time.Duration // the un-jittered waits
	}{
		{name: "doubles to the cap", base: 10 * time.Millisecond, cap: 50 * time.Millisecond,
			want: []time.Duration{10, 20, 40, 50, 50}},
		{name: "base above the cap", base: time.Second, cap: 100 * time.Millisecond,
			want: []time.Duration{100, 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.base, tc.cap)
			for round := range 2 {
				for i, w := range tc.want {
					w *= time.Millisecond
					got := b.Next()
					if lo, hi := w*8/10, w*12/10; got < lo || got > hi {
						t.Fatalf("round %d, wait %d: %s, want %s ±20%%", round, i, got, w)
					}
				}
				b.Reset()
			}
		})
	}
}

// TestBackoffHugeMaxDoesNotOverflow: with a cap beyond 2^62 ns (--cool-down-max over
// about 146 years) the doubling overflows, and the delay goes negative or
// zero after a streak of ~35 failures: the crash loop loses its backoff.
// Not a safety matter (no term is held during a cool-down).
func TestBackoffHugeMaxDoesNotOverflow(t *testing.T) {
	b := New(time.Second, math.MaxInt64)
	for i := 0; i < 80; i++ {
		b.Step()
		if d := b.Delay(); d < time.Second {
			t.Fatalf("after %d failures the delay is %v", b.Steps(), d)
		}
	}
}
