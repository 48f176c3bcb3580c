package supervisor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// queue is an elector.Switcher for the supervisor's loop tests: only its
// Queued is used, which reports the ids it holds.
type queue struct {
	elector.Elector
	ids map[string]bool
}

func (q queue) Queued(_ context.Context, id string) error {
	if !q.ids[id] {
		return &elector.NotQueuedError{ID: id}
	}
	return nil
}

// TestResignTo: a switchover is refused while the term still holds when
// this copy does not lead, names itself, the backend cannot hand over, or
// the candidate is not queued; else the term ends and is handed to the
// named candidate, once, and not resigned plainly.
func TestResignTo(t *testing.T) {
	tests := []struct {
		name     string
		grant    bool
		handover bool // the term can be handed over
		to       string
		want     error // errors.Is, or a *NotQueuedError when notQueued
		notQueue bool
	}{
		{name: "not leading", to: "c", want: ErrNotLeader},
		{name: "to itself", grant: true, handover: true, to: "me", want: elector.ErrSwitchoverToSelf},
		{name: "backend without switchover", grant: true, to: "c", want: elector.ErrNoSwitchover},
		{name: "not queued", grant: true, handover: true, to: "d", notQueue: true},
		{name: "handed over", grant: true, handover: true, to: "c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			handed := make(chan string, 2)
			if tc.grant {
				dl := elector.NewDeadline(h.clk, h.timing, h.clk.Now())
				term := elector.NewTerm(elector.Leader{ID: "me", Token: 9, Since: h.clk.Now()}, dl,
					func(context.Context) error { h.resigns <- struct{}{}; return nil })
				if tc.handover {
					term.WithSwitchover(queue{ids: map[string]bool{"c": true}}, func(_ context.Context, id string) error {
						if dl.Err() == nil {
							t.Error("handed over while the term still held")
						}
						handed <- id
						return nil
					})
				}
				h.el.terms <- term
				waitFor(t, "leading", h.sup.Leading)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := h.sup.ResignTo(ctx, tc.to)
			switch {
			case tc.notQueue:
				if nq := (*elector.NotQueuedError)(nil); !errors.As(err, &nq) || nq.ID != tc.to {
					t.Fatalf("ResignTo(%q) = %v, want a *NotQueuedError", tc.to, err)
				}
			case tc.want != nil:
				if !errors.Is(err, tc.want) {
					t.Fatalf("ResignTo(%q) = %v, want %v", tc.to, err, tc.want)
				}
			case err != nil:
				t.Fatalf("ResignTo(%q) = %v", tc.to, err)
			}
			if tc.want != nil || tc.notQueue {
				if tc.grant && !h.sup.Leading() {
					t.Fatal("a refused switchover ended the term")
				}
				select {
				case <-h.resigns:
					t.Fatal("a refused switchover resigned")
				case id := <-handed:
					t.Fatalf("a refused switchover handed the term to %s", id)
				default:
				}
				return
			}
			select {
			case id := <-handed:
				if id != tc.to {
					t.Fatalf("handed to %s, want %s", id, tc.to)
				}
			default:
				t.Fatal("ResignTo returned before the term was handed over")
			}
			select {
			case <-h.resigns:
				t.Fatal("the term was also resigned plainly")
			default:
			}
			if h.sup.Leading() {
				t.Fatal("still leading after the switchover")
			}
		})
	}
}

// TestSwitchoverAnswers: what each caller waiting on one term's end hears.
// A ResignTo caller hears success only if its own target got the term: a
// concurrent ResignTo to another candidate, or a term left to lapse (a
// survivor of the child's tree), is an error (both were answered nil).
func TestSwitchoverAnswers(t *testing.T) {
	failed := errors.New("store down")
	tests := []struct {
		name     string
		req      resignReq
		resigned bool
		to       string
		err      error
		wantErr  bool
		want     error // errors.Is, when set
	}{
		{name: "plain resign", req: resignReq{}, resigned: true, to: "c"},
		{name: "plain resign that failed", req: resignReq{}, resigned: true, err: failed, wantErr: true, want: failed},
		{name: "switchover done", req: resignReq{to: "c"}, resigned: true, to: "c"},
		{name: "switchover that failed", req: resignReq{to: "c"}, resigned: true, to: "c", err: failed, wantErr: true, want: failed},
		{name: "another switchover first", req: resignReq{to: "d"}, resigned: true, to: "c", wantErr: true},
		{name: "tree survived: not resigned", req: resignReq{to: "c"}, resigned: false, to: "c", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := answer(tc.req, tc.resigned, tc.to, tc.err)
			if (err != nil) != tc.wantErr || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("answer = %v, want error %v (%v)", err, tc.wantErr, tc.want)
			}
		})
	}
	if got := switchTarget([]resignReq{{}, {to: "c"}, {to: "d"}}); got != "c" {
		t.Errorf("switchTarget = %q, want the first ResignTo's, c", got)
	}
}
