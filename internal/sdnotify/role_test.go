package sdnotify

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/hook"
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

// TestRoleChanges: without systemd, OnChange is told each change of role
// as a hook sees it, from the same events as STATUS=: following with the
// leader's id and token, leading with this copy's token, waiting while the
// store still names this copy after its term, or cannot be reached; then
// stopped, after which nothing more.
func TestRoleChanges(t *testing.T) {
	changes := make(chan hook.Change, 10)
	r := NewRole(nil, "me", sink{}, slog.New(slog.DiscardHandler))
	r.OnChange(func(c hook.Change) { changes <- c })
	leaders := make(chan elector.Leader)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx, leaders, nil) }()
	next := func(want hook.Change) {
		t.Helper()
		select {
		case got := <-changes:
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no change within 10s; want %+v", want)
		}
	}

	leaders <- elector.Leader{ID: "other", Token: 4}
	next(hook.Change{Role: hook.Following, LeaderID: "other", Token: 4})
	leaders <- elector.Leader{ID: "me", Token: 6} // won: no news until the loop says so
	r.Acquired(6, 0)
	next(hook.Change{Role: hook.Leading, LeaderID: "me", Token: 6})
	r.StoreError("renew", errors.New("connection refused")) // still leading
	r.StoreAnswered("renew")
	r.Lost("expired") // the store names this copy until its lease ends
	next(hook.Change{Role: hook.Waiting})
	leaders <- elector.Leader{ID: "other", Token: 8}
	next(hook.Change{Role: hook.Following, LeaderID: "other", Token: 8})
	r.StoreError("observe", errors.New("connection refused"))
	next(hook.Change{Role: hook.Waiting})
	r.StoreAnswered("observe")
	next(hook.Change{Role: hook.Following, LeaderID: "other", Token: 8})

	// The loop has returned (a failed campaign) while Run still runs.
	r.Stopped()
	next(hook.Change{Role: hook.Stopped})
	leaders <- elector.Leader{ID: "third", Token: 9}
	r.Stopped()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-changes:
		t.Fatalf("a change after stopped: %+v", c)
	default:
	}
}
