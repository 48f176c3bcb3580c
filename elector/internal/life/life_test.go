package life

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

func TestCampaignAdmitsOneAtATime(t *testing.T) {
	l := New()
	ctx, end, err := l.Campaign(context.Background())
	if err != nil {
		t.Fatalf("first campaign: %v", err)
	}
	if _, _, err := l.Campaign(context.Background()); !errors.Is(err, ErrBusy) {
		t.Fatalf("second campaign while the first runs: %v, want ErrBusy", err)
	}
	end()
	if ctx.Err() == nil {
		t.Fatal("end did not cancel the campaign's context")
	}
	dl := elector.NewDeadline(clock.Real{}, elector.Timing{TTL: time.Minute}.WithDefaults(), time.Now())
	if !l.Lead(dl, func() { <-dl.Done() }) {
		t.Fatal("Lead refused on an open Life")
	}
	if _, _, err := l.Campaign(context.Background()); !errors.Is(err, ErrBusy) {
		t.Fatalf("campaign while a term lasts: %v, want ErrBusy", err)
	}
	dl.End(elector.ErrResigned)
	_, end, err = l.Campaign(context.Background())
	if err != nil {
		t.Fatalf("campaign after the term ended: %v", err)
	}
	end()
}

func TestCloseEndsTermCancelsAndWaits(t *testing.T) {
	l := New()
	dl := elector.NewDeadline(clock.Real{}, elector.Timing{TTL: time.Minute}.WithDefaults(), time.Now())
	kept := make(chan struct{})
	l.Lead(dl, func() { <-dl.Done(); close(kept) })
	cctx, end, err := l.Campaign(context.Background())
	if !errors.Is(err, ErrBusy) || cctx != nil || end != nil {
		t.Fatalf("campaign while leading: %v", err)
	}
	var stopped, drained bool
	if !l.Close(func() { stopped = true }, func() { drained = true }) {
		t.Fatal("first Close reported false")
	}
	select {
	case <-kept:
	default:
		t.Fatal("Close returned before the term's goroutine")
	}
	if !errors.Is(dl.Err(), elector.ErrClosed) || l.Context().Err() == nil || !stopped || !drained {
		t.Fatalf("after Close: term %v, context %v, stop %v, drained %v", dl.Err(), l.Context().Err(), stopped, drained)
	}
	if l.Close(nil, nil) {
		t.Fatal("second Close reported true")
	}
	if l.Go(func() { t.Error("Go ran after Close") }) || l.Lead(dl, func() {}) {
		t.Fatal("Go or Lead started something after Close")
	}
	if _, _, err := l.Campaign(context.Background()); !errors.Is(err, elector.ErrClosed) {
		t.Fatalf("campaign after Close: %v, want ErrClosed", err)
	}
}
