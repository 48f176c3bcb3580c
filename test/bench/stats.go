package main

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// dist summarises durations: nearest-rank percentiles (with 30 samples,
// p99 is the largest).
type dist struct {
	n                  int
	min, med, p99, max time.Duration
}

func summarize(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return dist{n: len(s), min: s[0], med: rank(0.5), p99: rank(0.99), max: s[len(s)-1]}
}

// ms renders a duration in milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch a := math.Abs(v); {
	case a >= 1000:
		return fmt.Sprintf("%.0f ms", v)
	case a >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case a >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func (d dist) String() string {
	if d.n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("median %s, p99 %s (min %s, max %s, n=%d)", ms(d.med), ms(d.p99), ms(d.min), ms(d.max), d.n)
}

// short is "median / p99".
func (d dist) short() string {
	if d.n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s / %s", ms(d.med), ms(d.p99))
}
