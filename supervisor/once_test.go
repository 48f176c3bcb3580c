package supervisor

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// onceRun is one RunOnce call on a fake clock, with its steps in order.
type onceRun struct {
	clk   *clock.Fake
	dl    *elector.Deadline
	term  *elector.Term
	sup   *Supervisor
	mu    sync.Mutex
	steps []string
}

func (o *onceRun) step(s string) { o.mu.Lock(); o.steps = append(o.steps, s); o.mu.Unlock() }

func (o *onceRun) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.steps)
}

func newOnceRun(t *testing.T, command ...string) *onceRun {
	t.Helper()
	o := &onceRun{clk: clock.NewFake(time.Unix(1_000_000, 0))}
	timing := elector.Timing{TTL: 10 * time.Second}.WithDefaults()
	o.dl = elector.NewDeadline(o.clk, timing, o.clk.Now())
	o.term = elector.NewTerm(elector.Leader{ID: "me", Token: 5, Since: o.clk.Now()}, o.dl,
		func(context.Context) error { o.step("resign"); return nil })
	sup, err := New(Config{Elector: &fakeElector{}, Election: "e", ID: "me",
		Command: command, StopTimeout: 200 * time.Millisecond, Clock: o.clk})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	o.sup = sup
	return o
}

// wantExit is a check of TestRunOnce: RunOnce returned an *ExitError with
// code.
func wantExit(code int) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var xe *ExitError
		if !errors.As(err, &xe) || xe.Code() != code {
			t.Fatalf("RunOnce = %v, want ExitError code %d", err, code)
		}
	}
}

func TestRunOnce(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		// before runs ahead of RunOnce; act ends the run from outside (nil:
		// the child ends it).
		before    func(o *onceRun)
		act       func(o *onceRun, cancel context.CancelFunc)
		check     func(t *testing.T, err error)
		wantSteps []string
	}{
		{
			name:      "child exits: afterExit runs before the release",
			command:   []string{"sh", "-c", "exit 3"},
			check:     wantExit(3),
			wantSteps: []string{"after:3", "resign"},
		},
		{
			name:      "killed child gives 128+signal",
			command:   []string{"sh", "-c", "kill -9 $$"},
			check:     wantExit(137),
			wantSteps: []string{"after:137", "resign"},
		},
		{
			name:    "term lost stops the child",
			command: []string{"sleep", "1000"},
			act:     func(o *onceRun, _ context.CancelFunc) { o.dl.End(elector.ErrLeadershipLost) },
			check: func(t *testing.T, err error) {
				var te *TermEndedError
				if !errors.As(err, &te) || te.Reason != "key_lost" || !errors.Is(err, elector.ErrLeadershipLost) {
					t.Fatalf("RunOnce = %v, want TermEndedError key_lost", err)
				}
				if te.Status.Signal == 0 {
					t.Fatalf("child status %+v, want stopped by a signal", te.Status)
				}
			},
			wantSteps: []string{"resign"},
		},
		{
			name:    "stop-by deadline without renewal",
			command: []string{"sleep", "1000"},
			act: func(o *onceRun, _ context.CancelFunc) {
				at := StopBy(o.term.ValidUntil(), 200*time.Millisecond)
				o.clk.Advance(at.Sub(o.clk.Now()))
			},
			check: func(t *testing.T, err error) {
				var te *TermEndedError
				if !errors.As(err, &te) || te.Reason != "deadline" {
					t.Fatalf("RunOnce = %v, want TermEndedError deadline", err)
				}
			},
			wantSteps: []string{"resign"},
		},
		{
			name:    "context ends",
			command: []string{"sleep", "1000"},
			act:     func(_ *onceRun, cancel context.CancelFunc) { cancel() },
			check: func(t *testing.T, err error) {
				var ie *InterruptedError
				if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) {
					t.Fatalf("RunOnce = %v, want InterruptedError", err)
				}
			},
			wantSteps: []string{"resign"},
		},
		{
			name:    "term over before the start: the command never runs",
			command: []string{"sleep", "1000"},
			before:  func(o *onceRun) { o.dl.End(elector.ErrLeaseLost) },
			check: func(t *testing.T, err error) {
				var te *TermEndedError
				if !errors.As(err, &te) || !te.NotStarted || te.Reason != "lease_lost" {
					t.Fatalf("RunOnce = %v, want TermEndedError lease_lost, not started", err)
				}
			},
			wantSteps: []string{"resign"},
		},
		{
			name:    "command does not start",
			command: []string{"/nonexistent/electd-test-command"},
			check: func(t *testing.T, err error) {
				var xe *ExitError
				if err == nil || errors.As(err, &xe) {
					t.Fatalf("RunOnce = %v, want a start error", err)
				}
			},
			wantSteps: []string{"resign"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := newOnceRun(t, tc.command...)
			if tc.before != nil {
				tc.before(o)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- o.sup.RunOnce(ctx, o.term, func(_ context.Context, st ExitStatus) {
					if o.term.Err() != nil {
						t.Errorf("afterExit ran after the term ended: %v", o.term.Err())
					}
					o.step("after:" + strconv.Itoa(st.ExitCode()))
				})
			}()
			if tc.act != nil {
				waitFor(t, "child running", func() bool { return o.sup.Child() != nil })
				tc.act(o, cancel)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("RunOnce did not return")
			}
			tc.check(t, err)
			if got := o.seen(); !slices.Equal(got, tc.wantSteps) {
				t.Fatalf("steps %v, want %v", got, tc.wantSteps)
			}
			if o.sup.Leading() || o.sup.Child() != nil {
				t.Fatal("still leading or with a child after RunOnce")
			}
		})
	}
}
