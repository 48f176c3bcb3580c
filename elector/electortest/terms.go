package electortest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// Span is one term as its holder saw it.
type Span struct {
	ID    string
	Token uint64
	Start time.Time // when Campaign returned the term
	// End is when the holder saw Done closed (zero while the term lasts).
	End time.Time
	// ValidUntil is the term's ValidUntil once it ended: the deadline it
	// expired at, or the moment it ended early (a Deadline never reports
	// one later than that).
	ValidUntil time.Time
	Err        error         // why it ended
	Term       *elector.Term // the term itself
}

func (s Span) String() string {
	return fmt.Sprintf("%s (token %d) %s..%s", s.ID, s.Token, s.Start.Format("15:04:05.000"), s.End.Format("15:04:05.000"))
}

// Terms is a set of candidates that campaign in a loop, each again as soon
// as its term ends, until Stop; it records every term as a Span. It is
// the observer of fault tests: whatever the store goes through, Stop
// checks that no two terms overlapped and that tokens only grew.
type Terms struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	spans   []Span          // ended terms
	open    map[string]Span // id → the term it holds now
	errs    []error         // campaigns that failed other than by Stop
	stopped bool
}

// CampaignLoop starts one loop per candidate (each its own Elector, with
// its own ID); Stop, or the end of the test, stops them.
func CampaignLoop(t testing.TB, cands ...elector.Elector) *Terms {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &Terms{cancel: cancel, open: map[string]Span{}}
	for _, e := range cands {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.loop(ctx, e)
		}()
	}
	t.Cleanup(func() { l.stop() })
	return l
}

func (l *Terms) loop(ctx context.Context, e elector.Elector) {
	for ctx.Err() == nil {
		term, err := e.Campaign(ctx)
		if err != nil {
			if ctx.Err() == nil {
				l.mu.Lock()
				l.errs = append(l.errs, err)
				l.mu.Unlock()
			}
			return
		}
		s := Span{ID: term.Leader.ID, Token: term.Token, Start: time.Now(), Term: term}
		l.mu.Lock()
		l.open[s.ID] = s
		l.mu.Unlock()
		select {
		case <-term.Done():
			s.End = time.Now()
		case <-ctx.Done():
			// Resign ends the term (Done closes, ValidUntil is clamped to
			// that moment) before it asks the store to hand over; its
			// successor may lead before Resign returns, so the end is
			// ValidUntil, not the time Resign returned.
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = term.Resign(rctx) // the test is ending; the store may refuse, the term has ended anyway
			rcancel()
			s.End = term.ValidUntil()
		}
		s.ValidUntil, s.Err = term.ValidUntil(), term.Err()
		l.mu.Lock()
		delete(l.open, s.ID)
		l.spans = append(l.spans, s)
		l.mu.Unlock()
	}
}

// Open returns the terms held now, as their holders see them, by start.
func (l *Terms) Open() []Span {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Span, 0, len(l.open))
	for _, s := range l.open {
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y Span) int { return x.Start.Compare(y.Start) })
	return out
}

// Leading returns the one term held now; false if none or several are.
func (l *Terms) Leading() (Span, bool) {
	o := l.Open()
	if len(o) != 1 {
		return Span{}, false
	}
	return o[0], true
}

// WaitLeading waits up to within for exactly one term to be held and
// returns it.
func (l *Terms) WaitLeading(t testing.TB, within time.Duration) Span {
	t.Helper()
	var s Span
	Eventually(t, within, "one leader", func() bool {
		var ok bool
		s, ok = l.Leading()
		return ok
	})
	return s
}

// SpanOf returns the term with token among spans, and fails t if there is
// none.
func SpanOf(t testing.TB, spans []Span, token uint64) Span {
	t.Helper()
	for _, s := range spans {
		if s.Token == token {
			return s
		}
	}
	t.Fatalf("no term with token %d among %v", token, spans)
	return Span{}
}

// WaitStarted waits up to within for a term that started after since,
// ended or not, and returns the first; it fails the test if none did.
func (l *Terms) WaitStarted(t testing.TB, since time.Time, within time.Duration) Span {
	t.Helper()
	var first Span
	Eventually(t, within, "a term started after "+since.Format("15:04:05.000"), func() bool {
		var ok bool
		first, ok = l.startedAfter(since)
		return ok
	})
	return first
}

func (l *Terms) startedAfter(since time.Time) (Span, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first Span
	for _, s := range l.spans {
		if s.Start.After(since) && (first.Start.IsZero() || s.Start.Before(first.Start)) {
			first = s
		}
	}
	for _, s := range l.open {
		if s.Start.After(since) && (first.Start.IsZero() || s.Start.Before(first.Start)) {
			first = s
		}
	}
	return first, !first.Start.IsZero()
}

// Ended returns the terms that have ended so far, by start.
func (l *Terms) Ended() []Span {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.spans)
	slices.SortFunc(out, func(x, y Span) int { return x.Start.Compare(y.Start) })
	return out
}

func (l *Terms) stop() {
	l.cancel()
	l.wg.Wait()
}

// Stop ends every loop (a holder resigns), then checks every term
// recorded: in order of start, each ended (Done and ValidUntil) before the
// next began, and each token is greater than the one before. It fails the
// test on any overlap, on a token that did not grow, and on a campaign
// that failed other than by Stop. It returns the terms, by start.
func (l *Terms) Stop(t testing.TB) []Span {
	t.Helper()
	l.stop()
	l.mu.Lock()
	stopped := l.stopped
	l.stopped = true
	l.mu.Unlock()
	spans := l.Ended()
	if stopped {
		return spans
	}
	for _, err := range l.errs {
		t.Errorf("a campaign failed: %v", err)
	}
	CheckTerms(t, spans)
	return spans
}

// CheckTerms fails the test unless the ended terms spans, sorted by
// start, never overlap: each one's End and ValidUntil are before the next
// one's Start, and tokens strictly increase.
func CheckTerms(t testing.TB, spans []Span) {
	t.Helper()
	for i := 1; i < len(spans); i++ {
		p, s := spans[i-1], spans[i]
		if !p.End.Before(s.Start) {
			t.Errorf("terms overlap: %s ended %s after %s began", p, p.End.Sub(s.Start), s)
		}
		if !p.ValidUntil.Before(s.Start) {
			t.Errorf("terms overlap: %s was valid until %s after %s began", p, p.ValidUntil.Sub(s.Start), s)
		}
		if s.Token <= p.Token {
			t.Errorf("token went from %d (%s) to %d (%s)", p.Token, p.ID, s.Token, s.ID)
		}
	}
}
