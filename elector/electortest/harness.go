package electortest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/faultproxy"
)

// Harness gives the suite access to one backend and its real store.
type Harness interface {
	// New returns a candidate of c.Election dialing the store at
	// c.StoreAddr (which may be a fault proxy). The harness closes it, and
	// any client it made, when the test ends.
	New(t testing.TB, c Candidate) elector.Elector
	// Addr is the real store's host:port.
	Addr() string
	// Restart stops the store and starts it again on the same address
	// (with its data where the store persists it).
	Restart(t testing.TB)
	// Queued counts the candidates the store holds for election, leader
	// included, by reading the store directly.
	Queued(t testing.TB, election string) int
}

// Candidate describes one candidate for Harness.New.
type Candidate struct {
	Election  string
	ID        string
	Address   string
	StoreAddr string
	Timing    elector.Timing
}

var seq atomic.Uint64

// uniqueElection gives every test its own election.
func uniqueElection(t testing.TB) string {
	return fmt.Sprintf("conf-%d-%d", time.Now().UnixNano()%1e9, seq.Add(1))
}

func timing(ttl time.Duration) elector.Timing { return elector.Timing{TTL: ttl} }

// candidate creates a candidate directly on the store.
func candidate(t testing.TB, h Harness, election, id string, ttl time.Duration) elector.Elector {
	return h.New(t, Candidate{Election: election, ID: id, Address: "http://" + id + ".test:4040", StoreAddr: h.Addr(), Timing: timing(ttl)})
}

// proxied creates a candidate behind its own fault proxy.
func proxied(t testing.TB, h Harness, election, id string, ttl time.Duration) (elector.Elector, *faultproxy.Proxy) {
	p, err := faultproxy.New(h.Addr())
	if err != nil {
		t.Fatalf("start proxy: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close proxy: %v", err)
		}
	})
	e := h.New(t, Candidate{Election: election, ID: id, StoreAddr: p.Addr(), Timing: timing(ttl)})
	return e, p
}

// campaign runs Campaign in the background; the result arrives on the channel.
type result struct {
	term *elector.Term
	err  error
	at   time.Time
}

func campaign(ctx context.Context, e elector.Elector) <-chan result {
	ch := make(chan result, 1)
	go func() {
		term, err := e.Campaign(ctx)
		ch <- result{term: term, err: err, at: time.Now()}
	}()
	return ch
}

func mustWin(t testing.TB, ch <-chan result, within time.Duration, who string) result {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: campaign: %v", who, r.err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("%s: did not lead within %s", who, within)
	}
	return result{}
}

func mustWait(t testing.TB, ch <-chan result, who string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: campaign returned while another leads (term %v, err %v)", who, r.term != nil, r.err)
	default:
	}
}

func resign(t testing.TB, term *elector.Term) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("resign: %v", err)
	}
	if !errors.Is(term.Err(), elector.ErrResigned) {
		t.Fatalf("after resign, term.Err() = %v, want ErrResigned", term.Err())
	}
}

// eventually polls cond until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// waitQueued waits until the store holds n candidates of election.
func waitQueued(t testing.TB, h Harness, election string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d queued candidates", n), func() bool { return h.Queued(t, election) == n })
}

// observer records what Observe delivers.
type observer struct {
	mu   sync.Mutex
	seen []elector.Leader
}

func observe(ctx context.Context, e elector.Elector) *observer {
	o := &observer{}
	ch := e.Observe(ctx)
	go func() {
		for l := range ch {
			o.mu.Lock()
			o.seen = append(o.seen, l)
			o.mu.Unlock()
		}
	}()
	return o
}

// ids lists the leaders seen, in order; a repeat of the same term (sent
// again with a refined Since) is one entry.
func (o *observer) ids() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for i, l := range o.seen {
		if i > 0 && l.SameTerm(o.seen[i-1]) {
			continue
		}
		id := l.ID
		if l.IsZero() {
			id = "<none>"
		}
		ids = append(ids, id)
	}
	return ids
}

func (o *observer) last() (elector.Leader, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seen) == 0 {
		return elector.Leader{}, false
	}
	return o.seen[len(o.seen)-1], true
}
