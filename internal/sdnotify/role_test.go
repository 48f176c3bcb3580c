package sdnotify

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// sink is a Sink that keeps nothing.
type sink struct{ elector.NopInstrument }

func (sink) Acquired(uint64, time.Duration)  {}
func (sink) CampaignFailed(error)            {}
func (sink) Lost(string)                     {}
func (sink) ChildStarted()                   {}
func (sink) ChildExited(string)              {}
func (sink) ChildBackoff(int, time.Duration) {}

// campaign is a Campaigner whose campaign waits for its context.
type campaign struct{}

func (campaign) Campaign(ctx context.Context) (*elector.Term, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRole: READY=1 only once the campaign has begun and the leader is
// known, STATUS= at each change of role, STOPPING=1 at the end.
func TestRole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	read := listen(t, path)
	r := NewRole(New(path), "me", sink{}, slog.New(slog.DiscardHandler))
	leaders := make(chan elector.Leader)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx, leaders, nil) }()

	leaders <- elector.Leader{ID: "other", Token: 4}
	if got, want := read(), "STATUS=following other\n"; got != want {
		t.Fatalf("before the campaign: got %q, want %q", got, want)
	}
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	go func() { _, _ = r.Campaigner(campaign{}).Campaign(cctx) }()
	if got, want := read(), "READY=1\n"; got != want {
		t.Fatalf("campaigning: got %q, want %q", got, want)
	}
	r.StoreError("renew", errors.New("connection refused"))
	if got, want := read(), "STATUS=waiting: store unreachable\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	r.StoreAnswered("renew")
	if got, want := read(), "STATUS=following other\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	r.Acquired(5, 0)
	if got, want := read(), "STATUS=leading (token 5)\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	r.Lost("resigned")
	leaders <- elector.Leader{}
	if got := read(); got != "STATUS=following other\n" && got != "STATUS=waiting: no leader\n" {
		t.Fatalf("after the term: got %q", got)
	}
	cancel()
	for got := read(); got != "STOPPING=1\nSTATUS=stopping\n"; got = read() {
		if got != "STATUS=waiting: no leader\n" {
			t.Fatalf("stopping: got %q", got)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
