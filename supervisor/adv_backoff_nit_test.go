package supervisor

import (
	"math"
	"testing"
	"time"
)

// TestAdvBackoffHugeMax: with a cap beyond 2^62 ns (--cool-down-max over
// about 146 years) the doubling overflows, and the delay goes negative or
// zero after a streak of ~35 failures: the crash loop loses its backoff.
// Not a safety matter (no term is held during a cool-down).
func TestAdvBackoffHugeMax(t *testing.T) {
	b := backoff{first: time.Second, max: math.MaxInt64}
	for i := 0; i < 80; i++ {
		b.step()
		if d := b.delay(); d < time.Second {
			t.Fatalf("after %d failures the delay is %v", b.steps, d)
		}
	}
}
