package main

import (
	"context"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// TestPlainLock: the textbook recipe holds for the first in line only,
// and hands the lock to the next when the holder's session closes.
func TestPlainLock(t *testing.T) {
	srv := testenv.StartZK(t)
	ctx := context.Background()
	a, err := startPlain([]string{srv.Addr()}, "test", "a", 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held := func(p *plainLock) func() bool {
		return func() bool { s, _, _, _ := p.times(); return !s.IsZero() }
	}
	if err := waitUntil(ctx, 10*time.Second, held(a)); err != nil {
		t.Fatalf("a does not hold: %v", err)
	}
	b, err := startPlain([]string{srv.Addr()}, "test", "b", 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	if err := waitUntil(ctx, 500*time.Millisecond, held(b)); err == nil {
		t.Fatal("b holds while a does")
	}
	a.close()
	if err := waitUntil(ctx, 10*time.Second, held(b)); err != nil {
		t.Fatalf("b does not hold after a closed: %v", err)
	}
}
