package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func clientv3WithPrefixCount() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}

func readFileLimit(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > limit {
		_, _ = f.Seek(st.Size()-limit, io.SeekStart)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// collector gathers samples from parallel groups.
type collector struct {
	mu sync.Mutex
	m  map[string][]time.Duration
}

func newCollector() *collector { return &collector{m: map[string][]time.Duration{}} }

func (c *collector) add(key string, d time.Duration) {
	c.mu.Lock()
	c.m[key] = append(c.m[key], d)
	c.mu.Unlock()
}

func (c *collector) get(key string) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.m[key]...)
}

// eachAtMost calls f on each of items, at most n at once, and returns when
// every call has.
func eachAtMost[T any](n int, items []T, f func(T)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for _, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(it)
		}()
	}
	wg.Wait()
}

// groups runs f for g = 0..n-1 in parallel and joins the errors.
func groups(n int, f func(g int) error) error {
	errs := make(chan error, n)
	for g := range n {
		go func() { errs <- f(g) }()
	}
	var out []error
	for range n {
		if err := <-errs; err != nil {
			out = append(out, err)
		}
	}
	if len(out) == 0 {
		return nil
	}
	if len(out) == 1 {
		return out[0]
	}
	return fmt.Errorf("%d groups failed; first: %w", len(out), out[0])
}

// trialGroups splits trials over ngroups groups run in parallel, as
// groups does: f gets its group and its share, n ≥ 1; a group without a
// trial does not run.
func trialGroups(trials, ngroups int, f func(g, n int) error) error {
	shares := split(trials, ngroups)
	return groups(ngroups, func(g int) error {
		if shares[g] == 0 {
			return nil
		}
		return f(g, shares[g])
	})
}

// split divides total trials over n groups (the first get one more).
func split(total, n int) []int {
	out := make([]int, n)
	for i := range total {
		out[i%n]++
	}
	return out
}
