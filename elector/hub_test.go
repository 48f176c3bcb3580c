package elector_test

import (
	"context"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

var hubT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func hubLeader(id string, token uint64) elector.Leader {
	return elector.Leader{ID: id, Address: "http://" + id + ":8080", Token: token, Since: hubT0.Add(time.Duration(token) * time.Second)}
}

func TestHubPublish(t *testing.T) {
	a1, b2 := hubLeader("a", 1), hubLeader("b", 2)
	exact := a1
	exact.Since = a1.Since.Add(3 * time.Millisecond)
	moved := a1
	moved.Address = "http://a:9090"
	elsewhere := a1
	elsewhere.Since = a1.Since.In(time.FixedZone("CET", 3600))
	none := elector.Leader{}
	tests := []struct {
		name string
		feed []elector.Leader
		want []elector.Change
	}{
		{name: "first value", feed: []elector.Leader{a1}, want: []elector.Change{elector.Changed}},
		{name: "first value none", feed: []elector.Leader{none}, want: []elector.Change{elector.Changed}},
		{name: "repeat", feed: []elector.Leader{a1, a1}, want: []elector.Change{elector.Changed, elector.Unchanged}},
		{name: "repeat none", feed: []elector.Leader{none, none}, want: []elector.Change{elector.Changed, elector.Unchanged}},
		{name: "same instant elsewhere", feed: []elector.Leader{a1, elsewhere}, want: []elector.Change{elector.Changed, elector.Unchanged}},
		{name: "since refined", feed: []elector.Leader{a1, exact}, want: []elector.Change{elector.Changed, elector.Refined}},
		{name: "address moved", feed: []elector.Leader{a1, moved}, want: []elector.Change{elector.Changed, elector.Refined}},
		{name: "handover", feed: []elector.Leader{a1, b2}, want: []elector.Change{elector.Changed, elector.Changed}},
		{name: "lost and back", feed: []elector.Leader{a1, none, a1}, want: []elector.Change{elector.Changed, elector.Changed, elector.Changed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := elector.NewHub()
			defer h.Close()
			for i, l := range tt.feed {
				if got := h.Publish(l); got != tt.want[i] {
					t.Errorf("Publish #%d (%+v) = %v, want %v", i, l, got, tt.want[i])
				}
				// The hub keeps the latest value it did not drop.
				if tt.want[i] != elector.Unchanged {
					if cur, ok := h.Current(); !ok || !cur.Equal(l) {
						t.Errorf("after Publish #%d: Current = %+v, %v; want %+v, true", i, cur, ok, l)
					}
				}
			}
		})
	}
}

// recv reads one value from ch, failing the test if none comes in time.
func recv(t *testing.T, ch <-chan elector.Leader) elector.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("channel closed, want a value")
		}
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("no value within 5s")
	}
	return elector.Leader{}
}

// wantClosed fails the test unless ch is closed, holding no value, within 5s.
func wantClosed(t *testing.T, ch <-chan elector.Leader) {
	t.Helper()
	select {
	case l, ok := <-ch:
		if ok {
			t.Errorf("got %+v, want a closed channel", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed within 5s")
	}
}

// TestHubSubscribeEveryChange: a queue subscriber gets the current value,
// then every value Publish did not drop (refinements too), in order.
func TestHubSubscribeEveryChange(t *testing.T) {
	h := elector.NewHub()
	defer h.Close()
	a1, b2 := hubLeader("a", 1), hubLeader("b", 2)
	exact := a1
	exact.Since = a1.Since.Add(time.Millisecond)
	h.Publish(a1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := h.Subscribe(ctx)
	for _, l := range []elector.Leader{a1, exact, exact, {}, b2} {
		h.Publish(l) // nobody reads yet: the subscriber's queue holds them
	}
	for i, want := range []elector.Leader{a1, exact, {}, b2} {
		if got := recv(t, ch); !got.Equal(want) {
			t.Fatalf("value %d = %+v, want %+v", i, got, want)
		}
	}
}

// TestHubSubscribeLatest: what a one-value subscriber holds right after each
// Publish, when it reads whatever it holds at once.
func TestHubSubscribeLatest(t *testing.T) {
	a1 := hubLeader("a", 1)
	exact := a1
	exact.Since = a1.Since.Add(time.Millisecond)
	tests := []struct {
		name   string
		before []elector.Leader // published before SubscribeLatest
		after  []elector.Leader // published after
		want   []elector.Leader
	}{
		{name: "current at once", before: []elector.Leader{a1}, want: []elector.Leader{a1}},
		{name: "unknown holds nothing"},
		{name: "first value", after: []elector.Leader{{}}, want: []elector.Leader{{}}},
		{name: "repeat not offered", before: []elector.Leader{a1}, after: []elector.Leader{a1}, want: []elector.Leader{a1}},
		{name: "refinement offered", before: []elector.Leader{a1}, after: []elector.Leader{exact, exact}, want: []elector.Leader{a1, exact}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := elector.NewHub()
			defer h.Close()
			for _, l := range tt.before {
				h.Publish(l)
			}
			ch := h.SubscribeLatest(context.Background())
			var got []elector.Leader
			take := func() {
				select {
				case l := <-ch:
					got = append(got, l)
				default:
				}
			}
			take()
			for _, l := range tt.after {
				h.Publish(l)
				take()
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if !got[i].Equal(tt.want[i]) {
					t.Errorf("value %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestHubSubscribeLatestCoalesces: a reader that lags holds only the newest
// value and delays nobody.
func TestHubSubscribeLatestCoalesces(t *testing.T) {
	h := elector.NewHub()
	defer h.Close()
	h.Publish(hubLeader("a", 1))
	lagging := h.SubscribeLatest(context.Background())
	prompt := h.SubscribeLatest(context.Background())
	recv(t, prompt)
	for tok := uint64(2); tok <= 50; tok++ {
		h.Publish(hubLeader("n", tok))
		if l := recv(t, prompt); l.Token != tok {
			t.Fatalf("prompt reader got token %d, want %d", l.Token, tok)
		}
	}
	if n := len(lagging); n != 1 {
		t.Fatalf("lagging reader holds %d values, want 1", n)
	}
	if l := <-lagging; l.Token != 50 {
		t.Errorf("lagging reader got token %d, want the newest, 50", l.Token)
	}
}

func TestHubSubscribeLatestEnds(t *testing.T) {
	a1 := hubLeader("a", 1)
	t.Run("closed when its context ends", func(t *testing.T) {
		h := elector.NewHub()
		defer h.Close()
		h.Publish(a1)
		ctx, cancel := context.WithCancel(context.Background())
		ch := h.SubscribeLatest(ctx)
		<-ch
		cancel()
		wantClosed(t, ch)
		h.Publish(hubLeader("b", 2)) // no send on the closed channel
	})
	t.Run("already ended context", func(t *testing.T) {
		h := elector.NewHub()
		defer h.Close()
		h.Publish(a1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wantClosed(t, h.SubscribeLatest(ctx))
	})
	t.Run("closed by Close", func(t *testing.T) {
		h := elector.NewHub()
		h.Publish(a1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := h.SubscribeLatest(ctx)
		<-ch
		h.Close()
		wantClosed(t, ch)
		wantClosed(t, h.SubscribeLatest(ctx)) // subscribed after Close
		// The unsubscribe after Close finds nothing to close (no double close).
		cancel()
	})
}
