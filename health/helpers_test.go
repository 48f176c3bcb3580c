package health

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// fakeObserver feeds a View from the test. Its channel is unbuffered, so a
// send returns once Run has taken the value.
type fakeObserver struct {
	ch chan elector.Leader
}

func newFakeObserver() *fakeObserver { return &fakeObserver{ch: make(chan elector.Leader)} }

func (f *fakeObserver) Observe(context.Context) <-chan elector.Leader { return f.ch }

// feed hands l to the View and returns after the View has applied it: the
// second, identical send is taken only after Run finished with the first
// (and is itself a no-op, the value being unchanged).
func (f *fakeObserver) feed(t *testing.T, l elector.Leader) {
	t.Helper()
	f.ch <- l
	f.ch <- l
}

// runView starts v.Run and stops it when the test ends.
func runView(t *testing.T, v *View) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("View.Run: %v", err)
		}
	})
}

// newRunningView returns a running View of election "e" and its feed.
func newRunningView(t *testing.T) (*View, *fakeObserver) {
	t.Helper()
	o := newFakeObserver()
	v := NewView("e", o, nil)
	runView(t, v)
	return v, o
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))

func leader(id string, token uint64) elector.Leader {
	return elector.Leader{ID: id, Address: "http://" + id + ":8080", Token: token, Since: t0.Add(time.Duration(token) * time.Second)}
}

// sseEvent is one Server-Sent Events block; comment blocks have Comment set.
type sseEvent struct {
	Event, Data, Comment string
}

type sseReader struct{ r *bufio.Reader }

// next reads up to the next blank line.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return ev, nil
		case strings.HasPrefix(line, ":"):
			ev.Comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "event: "):
			ev.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// nextEvent skips heartbeats.
func (s *sseReader) nextEvent() (sseEvent, error) {
	for {
		ev, err := s.next()
		if err != nil || ev.Comment == "" {
			return ev, err
		}
	}
}

// sameLeader reports whether a and b agree in every field.
func sameLeader(a, b elector.Leader) bool { return a.Equal(b) }
