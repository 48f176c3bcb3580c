package leaderwatch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
)

// shown collects what a Watch shows and notices, safe for concurrent use.
type shown struct {
	mu      sync.Mutex
	leaders []elector.Leader
	notices strings.Builder
}

func (s *shown) show(l elector.Leader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaders = append(s.leaders, l)
	return nil
}

func (s *shown) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notices.Write(p)
}

func (s *shown) get() ([]elector.Leader, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]elector.Leader(nil), s.leaders...), s.notices.String()
}

// waitFor polls until ok holds for what s has shown, for at most 10 s.
func (s *shown) waitFor(t *testing.T, what string, ok func([]elector.Leader, string) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok(s.get()) {
			return
		}
	}
	ls, notices := s.get()
	t.Fatalf("never %s; shown %v, notices %q", what, ls, notices)
}

// start runs a Watch over a channel the test feeds; it returns the channel
// and Run's result.
func start(t *testing.T, s *shown, reach *Reachability, giveUp time.Duration) (chan<- elector.Leader, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ls := make(chan elector.Leader)
	res := make(chan error, 1)
	w := Watch{Leaders: ls, Reach: reach, GiveUp: giveUp, Store: "redis://h:6379", Show: s.show, Notices: s}
	go func() { res <- w.Run(ctx) }()
	return ls, res
}

// TestWatchShowsEachTermOnce: a term published twice (etcd: before and
// after the leader writes its own start time) is shown once, with the
// since it was first seen with; a new term and "no leader" are shown.
func TestWatchShowsEachTermOnce(t *testing.T) {
	var s shown
	ls, _ := start(t, &s, NewReachability(), 0)
	t0 := time.Unix(1000, 0)
	a := elector.Leader{ID: "a", Token: 7, Since: t0}
	later := a
	later.Since = t0.Add(time.Second)
	b := elector.Leader{ID: "b", Token: 9, Since: t0.Add(2 * time.Second)}
	for _, l := range []elector.Leader{{}, a, later, b, {}} {
		ls <- l
	}
	s.waitFor(t, "showed the last \"no leader\"", func(got []elector.Leader, _ string) bool { return len(got) == 4 })
	got, _ := s.get()
	if !got[0].IsZero() || got[1].ID != "a" || !got[1].Since.Equal(t0) || got[2].ID != "b" || !got[3].IsZero() {
		t.Fatalf("shown %v, want none, a (since %v), b, none", got, t0)
	}
}

// TestWatchStoreUnreachable: while the store does not answer, "no leader"
// is held back (the leader is unknown) and the notices say so once; when
// it answers again they say so, and the held "no leader" is shown.
func TestWatchStoreUnreachable(t *testing.T) {
	var s shown
	reach := NewReachability()
	ls, _ := start(t, &s, reach, 0)
	ls <- elector.Leader{ID: "a", Token: 7, Since: time.Unix(1000, 0)}
	reach.StoreError("watch", errors.New("connection refused"))
	reach.StoreError("ping", errors.New("connection refused"))
	s.waitFor(t, "said the store cannot be reached", func(_ []elector.Leader, n string) bool {
		return strings.Contains(n, "electd: the store redis://h:6379 cannot be reached: connection refused; the leader is unknown")
	})
	ls <- elector.Leader{}
	time.Sleep(50 * time.Millisecond)
	if got, notices := s.get(); len(got) != 1 || strings.Count(notices, "cannot be reached") != 1 {
		t.Fatalf("during the outage: shown %v, notices %q; want only a, one notice", got, notices)
	}
	reach.StoreAnswered("watch")
	reach.StoreAnswered("ping")
	s.waitFor(t, "showed the held \"no leader\" once the store answered", func(got []elector.Leader, n string) bool {
		return strings.Contains(n, "answers again") && len(got) == 2 && got[1].IsZero()
	})
}

// TestWatchGivesUp: an outage that lasts GiveUp ends the watch with a
// *store.UnreachableError (exit 69); without GiveUp it does not.
func TestWatchGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		giveUp time.Duration
	}{{"gives up", 100 * time.Millisecond}, {"waits", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			var s shown
			reach := NewReachability()
			_, res := start(t, &s, reach, tc.giveUp)
			reach.StoreError("ping", errors.New("i/o timeout"))
			select {
			case err := <-res:
				var ue *store.UnreachableError
				if tc.giveUp == 0 || !errors.As(err, &ue) || !strings.Contains(err.Error(), "gave up after --timeout 100ms: the store redis://h:6379 cannot be reached: i/o timeout") {
					t.Fatalf("Run returned %v", err)
				}
			case <-time.After(time.Second):
				if tc.giveUp > 0 {
					t.Fatal("still watching a second after the store stopped answering")
				}
			}
		})
	}
}

// TestWatchEndsDuringOutage: a watch that ends while the store does not
// answer is a *store.UnreachableError, not a clean end.
func TestWatchEndsDuringOutage(t *testing.T) {
	var s shown
	reach := NewReachability()
	ls, res := start(t, &s, reach, 0)
	reach.StoreError("watch", errors.New("connection refused"))
	close(ls)
	var ue *store.UnreachableError
	if err := <-res; !errors.As(err, &ue) {
		t.Fatalf("Run returned %v, want a *store.UnreachableError", err)
	}
}
