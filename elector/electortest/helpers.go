package electortest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// The helpers below serve the suite and the backends' own tests alike.

// Result is a finished Campaign and when it returned.
type Result struct {
	Term *elector.Term
	Err  error
	At   time.Time
}

// Campaign runs e.Campaign(ctx) in the background; its Result arrives on
// the channel.
func Campaign(ctx context.Context, e elector.Elector) <-chan Result {
	ch := make(chan Result, 1)
	go func() {
		term, err := e.Campaign(ctx)
		ch <- Result{Term: term, Err: err, At: time.Now()}
	}()
	return ch
}

// MustLead waits up to within for the campaign on ch to win, and fails the
// test if it fails or has not won by then; who names the candidate.
func MustLead(t testing.TB, ch <-chan Result, within time.Duration, who string) Result {
	t.Helper()
	select {
	case r := <-ch:
		if r.Err != nil {
			t.Fatalf("%s: campaign: %v", who, r.Err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("%s: did not lead within %s", who, within)
	}
	return Result{}
}

// StillWaiting fails the test if the campaign on ch has returned, as it
// must not while another candidate leads.
func StillWaiting(t testing.TB, ch <-chan Result, who string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: campaign returned while another leads (term %v, err %v)", who, r.Term != nil, r.Err)
	default:
	}
}

// Resign resigns term and checks that it ended with elector.ErrResigned.
func Resign(t testing.TB, term *elector.Term) {
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

// Eventually polls cond until it holds, and fails the test after within.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// Logger is the logger a backend's tests give their electors: debug text on
// stderr when $ELECTD_TEST_LOG is set, else nil (the backend's default).
func Logger() *slog.Logger {
	if os.Getenv("ELECTD_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// renewalTimes is an elector.Instrument that keeps what Renewed reports.
type renewalTimes struct {
	elector.NopInstrument
	mu   sync.Mutex
	took []time.Duration
}

func (r *renewalTimes) Renewed(took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.took = append(r.took, took)
}

func (r *renewalTimes) all() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.took)
}
