package lock

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/test/kit"
)

// TestMeasureIdleWaiter measures the store requests that one `electd lock`
// sends per minute while it waits behind a holder, at the default --ttl
// (15s): the store's own counters (etcd: grpc_server_started_total from
// /metrics; Redis: INFO commandstats) over a window with the holder alone,
// then over one with the holder and the waiter; the difference is the
// waiter's. Set ELECTD_LOCK_MEASURE=1 to run it (two 30 s windows per
// backend; ELECTD_LOCK_MEASURE_WINDOW changes their length).
func TestMeasureIdleWaiter(t *testing.T) {
	if os.Getenv("ELECTD_LOCK_MEASURE") != "1" {
		t.Skip("a measurement, not a test: set ELECTD_LOCK_MEASURE=1")
	}
	window := 30 * time.Second
	if s := os.Getenv("ELECTD_LOCK_MEASURE_WINDOW"); s != "" {
		var err error
		if window, err = time.ParseDuration(s); err != nil {
			t.Fatalf("ELECTD_LOCK_MEASURE_WINDOW: %v", err)
		}
	}
	kit.Run(t, kit.Backends, func(t *testing.T, s *kit.Store) {
		counter, ok := s.Servers.(kit.Counter)
		if !ok {
			t.Fatalf("%s counts no requests (kit.Counter)", s.Name)
		}
		count := func() (map[string]int, error) { return counter.Counts(context.Background()) }
		h := newHarness(t, s)
		slow := opts{args: []string{"--ttl", "15s", "--log-level", "warn"}}
		h.lock("holder", slow)
		h.waitRunWithin("holder", 3*15*time.Second) // Redis: one TTL before the first grant
		alone := measure(t, count, window)
		h.lock("waiter", slow)
		h.waitQueued(2)
		both := measure(t, count, window)
		perMin := func(n int) float64 { return float64(n) * float64(time.Minute) / float64(window) }
		var parts []string
		total, growth := 0, map[string]int{}
		for _, m := range sortedKeys(both, alone) {
			if d := both[m] - alone[m]; d != 0 {
				parts = append(parts, fmt.Sprintf("%s %.1f", m, perMin(d)))
				total += d
				growth[m] = d
			}
		}
		requests := counter.RoundTrips(growth) // Redis: the rest run inside the scripts
		t.Logf("%s, --ttl 15s: a waiting electd lock sends %.1f requests/min; the store runs %.1f commands/min for it (%s); the holder alone: %.1f/min",
			s.Name, perMin(requests), perMin(total), strings.Join(parts, ", "), perMin(sum(alone)))
	})
}

// measure returns what count grew by over window, per key.
func measure(t *testing.T, count func() (map[string]int, error), window time.Duration) map[string]int {
	t.Helper()
	before, err := count()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(window) // a measurement window, not a synchronisation
	after, err := count()
	if err != nil {
		t.Fatal(err)
	}
	d := map[string]int{}
	for k, v := range after {
		if v -= before[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

func sortedKeys(ms ...map[string]int) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
