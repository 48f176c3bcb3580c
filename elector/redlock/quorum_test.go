package redlock

import (
	"testing"
	"time"
)

// TestQuorumSent: the term's deadline follows the m-th latest
// acknowledged send time, and there is none with fewer than m.
func TestQuorumSent(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	var z time.Time
	tests := []struct {
		name string
		sent []time.Time
		want time.Time // zero: no quorum
	}{
		{"3 of 3", []time.Time{at(30), at(10), at(20)}, at(20)},
		{"2 of 3", []time.Time{at(30), z, at(10)}, at(10)},
		{"1 of 3", []time.Time{z, at(10), z}, z},
		{"0 of 3", []time.Time{z, z, z}, z},
		{"5 of 5", []time.Time{at(50), at(10), at(40), at(20), at(30)}, at(30)},
		{"4 of 5", []time.Time{at(50), z, at(40), at(20), at(30)}, at(30)},
		{"3 of 5", []time.Time{at(50), z, z, at(20), at(30)}, at(20)},
		{"2 of 5", []time.Time{at(50), z, z, z, at(30)}, z},
		// Even N: a majority of 4 is 3, so the 3rd latest.
		{"4 of 4", []time.Time{at(40), at(10), at(30), at(20)}, at(20)},
		{"3 of 4", []time.Time{at(40), z, at(30), at(20)}, at(20)},
		{"2 of 4", []time.Time{at(40), z, at(30), z}, z},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := quorumSent(tt.sent)
			if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
				t.Fatalf("quorumSent = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}

// TestQuorumSentIsSafe checks the rule against every way the other
// servers could be granted: at the deadline's send time s*, at least m
// servers acknowledged at or after s*, so fewer than m can be free
// before s* + window, and no other candidate holds a majority.
func TestQuorumSentIsSafe(t *testing.T) {
	for n := 3; n <= 7; n++ {
		m := majority(n)
		// Every pattern of acknowledged (at 1..n ms) or silent servers.
		for mask := 0; mask < 1<<n; mask++ {
			sent := make([]time.Time, n)
			for i := range n {
				if mask&(1<<i) != 0 {
					sent[i] = time.Unix(0, int64(i+1)*int64(time.Millisecond))
				}
			}
			q, ok := quorumSent(sent)
			acked := 0
			for _, s := range sent {
				if !s.IsZero() {
					acked++
				}
			}
			if ok != (acked >= m) {
				t.Fatalf("n=%d mask=%b: ok=%v with %d acknowledged", n, mask, ok, acked)
			}
			if !ok {
				continue
			}
			// Servers whose lease for us may have lapsed by q + window:
			// those that never acknowledged, or acknowledged before q.
			free := 0
			for _, s := range sent {
				if s.IsZero() || s.Before(q) {
					free++
				}
			}
			if free >= m {
				t.Fatalf("n=%d mask=%b: %d servers may be free at the deadline, a majority", n, mask, free)
			}
		}
	}
}

func TestQuorumWake(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(1000, 0).Add(time.Duration(ms) * time.Millisecond) }
	var z time.Time
	tests := []struct {
		name string
		wake []time.Time
		want time.Time
	}{
		{"all known", []time.Time{at(30), at(10), at(20)}, at(20)},
		{"two known", []time.Time{at(30), z, at(10)}, at(30)},
		{"one known", []time.Time{z, at(10), z}, z},
		{"five", []time.Time{at(50), at(10), z, at(20), at(30)}, at(30)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := quorumWake(tt.wake)
			if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
				t.Fatalf("quorumWake = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
}
