package supervisor

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// fakeElector hands out terms on demand; the store is not what these tests
// are about (the backends' conformance suite runs on real stores).
type fakeElector struct {
	terms chan *elector.Term
	// campaigning, if not nil, gets a value (if it has room) as Campaign
	// begins: the candidate waits, its child's init prepared.
	campaigning chan struct{}
}

func (f *fakeElector) Campaign(ctx context.Context) (*elector.Term, error) {
	select {
	case f.campaigning <- struct{}{}:
	default:
	}
	select {
	case t := <-f.terms:
		return t, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// recorder is a supervisor.Events that remembers what happened.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string)                   { r.mu.Lock(); r.events = append(r.events, s); r.mu.Unlock() }
func (r *recorder) Acquired(uint64, time.Duration) { r.add("acquired") }
func (r *recorder) CampaignFailed(error)           { r.add("campaign_failed") }
func (r *recorder) Lost(reason string)             { r.add("lost:" + reason) }
func (r *recorder) ChildStarted()                  { r.add("child_started") }
func (r *recorder) ChildExited(o string)           { r.add("child_exited:" + o) }
func (r *recorder) ChildBackoff(n int, d time.Duration) {
	r.add("backoff:" + strconv.Itoa(n) + ":" + d.String())
}
func (r *recorder) count(s string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e == s {
			n++
		}
	}
	return n
}

func (r *recorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e == s {
			return true
		}
	}
	return false
}

type harness struct {
	clk     *clock.Fake
	timing  elector.Timing
	el      *fakeElector
	ev      *recorder
	sup     *Supervisor
	cancel  context.CancelFunc
	done    chan error
	resigns chan struct{}
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{
		clk:     clock.NewFake(time.Unix(1_000_000, 0)),
		timing:  elector.Timing{TTL: 10 * time.Second}.WithDefaults(), // window 9.89s, renew 2s
		el:      &fakeElector{terms: make(chan *elector.Term, 1)},
		ev:      &recorder{},
		done:    make(chan error, 1),
		resigns: make(chan struct{}, 8),
	}
	cfg := Config{Elector: h.el, Election: "e", ID: "me", StopTimeout: time.Second,
		Events: h.ev, Clock: h.clk, CoolDown: time.Hour}
	if mutate != nil {
		mutate(&cfg)
	}
	sup, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.sup = sup
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- sup.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return h
}

// runReturned waits up to within for Run to return (its ctx ended), fails
// the test with the message format and args if it has not, and hands
// Run's error back for the harness's cleanup as it returns it.
func (h *harness) runReturned(t *testing.T, within time.Duration, format string, args ...any) error {
	t.Helper()
	select {
	case err := <-h.done:
		h.done <- err
		return err
	case <-time.After(within):
		t.Fatalf(format, args...)
		return nil
	}
}

// grant hands the supervisor a term whose lease was renewed now.
func (h *harness) grant(token uint64) (*elector.Term, *elector.Deadline) {
	dl := elector.NewDeadline(h.clk, h.timing, h.clk.Now())
	term := elector.NewTerm(elector.Leader{ID: "me", Token: token, Since: h.clk.Now()}, dl,
		func(context.Context) error { h.resigns <- struct{}{}; return nil })
	h.el.terms <- term
	return term, dl
}

// grantAfterCoolDown hands the supervisor term token and steps the clock
// through its cool-down until it takes the term. The term is renewed "in
// the future" (a day ahead), so that the clock can be stepped through the
// cool-down without a race against the cool-down's timer.
func (h *harness) grantAfterCoolDown(t *testing.T, token uint64) {
	t.Helper()
	sent := h.clk.Now().Add(24 * time.Hour)
	dl := elector.NewDeadline(h.clk, h.timing, sent)
	h.el.terms <- elector.NewTerm(elector.Leader{ID: "me", Token: token, Since: sent}, dl,
		func(context.Context) error { h.resigns <- struct{}{}; return nil })
	waitUntil(t, 20*time.Second, func() bool {
		if len(h.el.terms) == 0 {
			return true
		}
		h.clk.Advance(h.sup.cfg.CoolDown)
		time.Sleep(10 * time.Millisecond) // polling with a deadline
		return false
	}, "term %d taken", token)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
}

func TestStopsBeforeDeadlineWithoutRenewal(t *testing.T) {
	h := newHarness(t, nil) // readiness-only: the term itself is what must end in time
	term, _ := h.grant(7)
	waitFor(t, "leading", h.sup.Leading)
	stopAt := StopBy(term.ValidUntil(), time.Second)

	h.clk.Advance(stopAt.Sub(h.clk.Now()) - time.Millisecond)
	if ready, _ := h.sup.Ready(); !h.sup.Leading() || !ready {
		t.Fatal("stopped leading before the stop-by moment")
	}
	h.clk.Advance(time.Millisecond)
	waitFor(t, "leadership given up", func() bool { return !h.sup.Leading() })
	if !h.clk.Now().Before(term.ValidUntil().Add(time.Nanosecond)) {
		t.Fatalf("gave up at %v, after ValidUntil %v", h.clk.Now(), term.ValidUntil())
	}
	waitFor(t, "lost:deadline", func() bool { return h.ev.has("lost:deadline") })
	select {
	case <-h.resigns:
	case <-time.After(5 * time.Second):
		t.Fatal("term not resigned after stopping")
	}
}

func TestRenewalsPostponeTheStop(t *testing.T) {
	h := newHarness(t, nil)
	term, dl := h.grant(8)
	waitFor(t, "leading", h.sup.Leading)
	for range 10 { // ten renewal intervals, renewed each time
		h.clk.Advance(h.timing.RenewInterval)
		if _, ok := dl.Renewed(h.clk.Now()); !ok {
			t.Fatalf("renewal refused: %v", dl.Err())
		}
	}
	// Far past the first term's original stop-by moment, still leading.
	if !h.sup.Leading() || term.Err() != nil {
		t.Fatalf("lost leadership despite renewals: %v", term.Err())
	}
	h.clk.Advance(h.timing.Window()) // now silence
	waitFor(t, "leadership given up", func() bool { return !h.sup.Leading() })
}

func TestTermLossStopsChild(t *testing.T) {
	// A lost term leaves no grace (its ValidUntil is the moment of the
	// loss): the tree is SIGKILLed at once, without a stop signal first.
	tests := []struct {
		name    string
		mode    Containment
		outcome string
	}{
		{name: "pgroup", mode: ContainPgroup, outcome: "killed"},
		{name: "pidns", mode: ContainPidns, outcome: "killed"},
		{name: "userns", mode: ContainUserns, outcome: "killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needMode(t, tt.mode)
			h := newHarness(t, func(c *Config) { c.Command, c.Containment = []string{"sleep", "1000"}, tt.mode })
			_, dl := h.grant(9)
			waitFor(t, "child running", func() bool { return h.sup.Child() != nil })
			child := h.sup.Child()
			if ready, reason := h.sup.Ready(); !ready {
				t.Fatalf("not ready with a running child: %s", reason)
			}
			dl.End(elector.ErrLeadershipLost)
			select {
			case <-child.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("child still running after the term ended")
			}
			waitFor(t, "loss recorded", func() bool {
				return h.ev.has("lost:key_lost") && h.ev.has("child_exited:"+tt.outcome)
			})
		})
	}
}

func TestResignRequest(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Command = []string{"sleep", "1000"} })
	ctx := context.Background()
	if err := h.sup.Resign(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Resign while not leading = %v, want ErrNotLeader", err)
	}
	h.grant(10)
	waitFor(t, "child running", func() bool { return h.sup.Child() != nil })
	child := h.sup.Child()
	if err := h.sup.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	select {
	case <-child.Done():
	default:
		t.Fatal("Resign returned while the child still runs")
	}
	if h.sup.Leading() {
		t.Fatal("still leading after Resign")
	}
	if !h.ev.has("lost:resigned") {
		t.Fatalf("events %v lack lost:resigned", h.ev.events)
	}
}

func TestOnExitExitPassesCode(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Command = []string{"sh", "-c", "exit 7"}
		c.OnExit = OnExitExit
	})
	h.grant(11)
	select {
	case err := <-h.done:
		var xe *ExitError
		if !errors.As(err, &xe) || xe.Code() != 7 {
			t.Fatalf("Run = %v, want ExitError code 7", err)
		}
		h.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the child exited")
	}
}

// TestConfigValidation: what New refuses. The stop timeout against the
// timing is checked per term: TestTermTimingRefused.
func TestConfigValidation(t *testing.T) {
	base := func() Config {
		return Config{Elector: &fakeElector{}, StopTimeout: 500 * time.Millisecond}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		field  string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "negative stop-timeout", mutate: func(c *Config) { c.StopTimeout = -time.Second }, field: "stop-timeout"},
		{name: "bad on-exit", mutate: func(c *Config) { c.OnExit = "explode" }, field: "on-exit"},
		{name: "negative cool-down", mutate: func(c *Config) { c.CoolDown = -time.Second }, field: "cool-down"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.mutate(&cfg)
			_, err := New(cfg)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("New = %v", err)
				}
				return
			}
			var ce *elector.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("New = %v, want a ConfigError on %s", err, tc.field)
			}
		})
	}
}
