package health

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/electd/electd/elector"
)

type countingCounter struct{ n atomic.Uint64 }

func (c *countingCounter) LeaderChanged() { c.n.Add(1) }

func TestViewCurrentAndChanges(t *testing.T) {
	a1, b2, c3 := leader("a", 1), leader("b", 2), leader("c", 3)
	moved := a1
	moved.Address = "http://a:9090"
	none := elector.Leader{}
	tests := []struct {
		name    string
		feed    []elector.Leader
		want    elector.Leader
		changes uint64
	}{
		{name: "first observation is the baseline", feed: []elector.Leader{a1}, want: a1, changes: 0},
		{name: "first observation none", feed: []elector.Leader{none}, want: none, changes: 0},
		{name: "election after none", feed: []elector.Leader{none, a1}, want: a1, changes: 1},
		{name: "handover without gap", feed: []elector.Leader{a1, b2}, want: b2, changes: 1},
		{name: "handover through none counts once", feed: []elector.Leader{a1, none, b2}, want: b2, changes: 1},
		{name: "leader lost", feed: []elector.Leader{a1, none}, want: none, changes: 0},
		{name: "same term back after gap", feed: []elector.Leader{a1, none, a1}, want: a1, changes: 0},
		{name: "address change is not a new term", feed: []elector.Leader{a1, moved}, want: moved, changes: 0},
		{name: "three terms", feed: []elector.Leader{a1, b2, none, c3}, want: c3, changes: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newFakeObserver()
			v := NewView("e", o, nil)
			var cc countingCounter
			v.CountChanges(&cc)
			runView(t, v)
			if _, ok := v.Current(); ok {
				t.Fatal("Current known before the first observation")
			}
			for _, l := range tt.feed {
				o.feed(t, l)
			}
			got, ok := v.Current()
			if !ok || !sameLeader(got, tt.want) {
				t.Errorf("Current = %+v, %v; want %+v, true", got, ok, tt.want)
			}
			if n := v.Changes(); n != tt.changes {
				t.Errorf("Changes = %d, want %d", n, tt.changes)
			}
			if n := cc.n.Load(); n != tt.changes {
				t.Errorf("LeaderChanged calls = %d, want %d", n, tt.changes)
			}
		})
	}
}

func TestViewSubscribe(t *testing.T) {
	a1, b2, c3 := leader("a", 1), leader("b", 2), leader("c", 3)
	tests := []struct {
		name   string
		before []elector.Leader // fed before Subscribe
		after  []elector.Leader // fed after, each read before the next
		want   []elector.Leader
	}{
		{name: "unknown then changes", after: []elector.Leader{a1, b2}, want: []elector.Leader{a1, b2}},
		{name: "current first", before: []elector.Leader{a1}, after: []elector.Leader{b2, {}, c3}, want: []elector.Leader{a1, b2, {}, c3}},
		{name: "duplicates are not sent", before: []elector.Leader{a1}, after: []elector.Leader{a1, b2}, want: []elector.Leader{a1, b2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, o := newRunningView(t)
			for _, l := range tt.before {
				o.feed(t, l)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch := v.Subscribe(ctx)
			var got []elector.Leader
			if len(tt.before) > 0 {
				got = append(got, <-ch)
			}
			for _, l := range tt.after {
				o.feed(t, l)
				if len(ch) == 1 {
					got = append(got, <-ch)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d values %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if !sameLeader(got[i], tt.want[i]) {
					t.Errorf("value %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestViewSubscribeCoalesces(t *testing.T) {
	v, o := newRunningView(t)
	o.feed(t, leader("a", 1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lagging := v.Subscribe(ctx)
	prompt := v.Subscribe(ctx)
	if l := <-prompt; l.Token != 1 {
		t.Fatalf("prompt subscriber first got token %d, want 1", l.Token)
	}
	for tok := uint64(2); tok <= 50; tok++ {
		o.feed(t, leader("n", tok))
		if l := <-prompt; l.Token != tok {
			t.Fatalf("prompt subscriber got token %d, want %d", l.Token, tok)
		}
	}
	// The lagging subscriber read nothing: it holds only the newest value.
	if n := len(lagging); n != 1 {
		t.Fatalf("lagging subscriber holds %d values, want 1", n)
	}
	if l := <-lagging; l.Token != 50 {
		t.Errorf("lagging subscriber got token %d, want the newest, 50", l.Token)
	}
	if n := len(lagging); n != 0 {
		t.Errorf("lagging subscriber holds %d more values, want 0", n)
	}
}

func TestViewSubscribeEnds(t *testing.T) {
	t.Run("subscriber context ends", func(t *testing.T) {
		v, o := newRunningView(t)
		o.feed(t, leader("a", 1))
		ctx, cancel := context.WithCancel(context.Background())
		ch := v.Subscribe(ctx)
		<-ch
		cancel()
		for range ch { // drains until closed
		}
		o.feed(t, leader("b", 2)) // no send on the closed channel
	})
	t.Run("already ended context", func(t *testing.T) {
		v, _ := newRunningView(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, ok := <-v.Subscribe(ctx); ok {
			t.Error("got a value, want a closed channel")
		}
	})
	t.Run("run returns", func(t *testing.T) {
		o := newFakeObserver()
		v := NewView("e", o, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- v.Run(ctx) }()
		o.feed(t, leader("a", 1))
		ch := v.Subscribe(context.Background())
		<-ch
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v, want nil on context end", err)
		}
		if _, ok := <-ch; ok {
			t.Error("subscription not closed after Run returned")
		}
		if _, ok := v.Current(); ok {
			t.Error("Current still known after Run returned")
		}
		if _, ok := <-v.Subscribe(context.Background()); ok {
			t.Error("Subscribe after Run returned: got a value, want a closed channel")
		}
	})
}

func TestViewRunErrors(t *testing.T) {
	t.Run("observer closes early", func(t *testing.T) {
		o := newFakeObserver()
		v := NewView("e", o, nil)
		close(o.ch)
		err := v.Run(context.Background())
		if !errors.Is(err, errObserverClosed) {
			t.Errorf("Run = %v, want errObserverClosed", err)
		}
	})
	t.Run("second run", func(t *testing.T) {
		v, o := newRunningView(t)
		o.feed(t, leader("a", 1)) // the first Run is running
		if err := v.Run(context.Background()); err == nil {
			t.Error("second Run = nil, want an error")
		}
	})
}
