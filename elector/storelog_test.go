package elector_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// step is one event for a StoreLog: a failure or success of op, after
// advancing the clock by wait.
type step struct {
	wait  time.Duration
	op    string
	fail  bool
	class string // given with elector.Classify; empty: none
	attrs []any
}

func fail(wait time.Duration, op string, attrs ...any) step {
	return step{wait: wait, op: op, fail: true, attrs: attrs}
}
func failAs(wait time.Duration, op, class string) step {
	return step{wait: wait, op: op, fail: true, class: class}
}
func ok(wait time.Duration, op string) step { return step{wait: wait, op: op} }

// render shows a line as "LEVEL msg k=v …", keys sorted, err left out.
func render(ln electortest.LogLine) string {
	var kv []string
	for k, v := range ln.Attrs {
		if k != "err" {
			kv = append(kv, k+"="+v.String())
		}
	}
	slices.Sort(kv)
	return strings.Join(append([]string{ln.Level.String(), ln.Msg}, kv...), " ")
}

func TestStoreLog(t *testing.T) {
	const (
		failed = "store request failed; retrying"
		again  = "store request failed again; retrying"
		still  = "store request still failing; retrying"
		answer = "store answers again"
	)
	tests := []struct {
		name  string
		steps []step
		want  []string
	}{
		{
			name:  "one failure, then the answer",
			steps: []step{fail(0, "renew"), ok(time.Second, "renew")},
			want:  []string{"WARN " + failed + " class=other op=renew", "INFO " + answer + " after=1s failures=1 op=renew"},
		},
		{
			name:  "answers without failures are silent",
			steps: []step{ok(0, "renew"), ok(time.Second, "renew")},
		},
		{
			name: "repeated failures: one warning per interval",
			steps: []step{
				fail(0, "campaign"), fail(10*time.Second, "campaign"), fail(10*time.Second, "campaign"),
				fail(10*time.Second, "campaign"), // 30 s after the first warning
				fail(5*time.Second, "campaign"), ok(time.Second, "campaign"),
			},
			want: []string{
				"WARN " + failed + " class=other op=campaign",
				"DEBUG " + again + " class=other op=campaign",
				"DEBUG " + again + " class=other op=campaign",
				"WARN " + still + " class=other failures=4 for=30s op=campaign suppressed=2",
				"DEBUG " + again + " class=other op=campaign",
				"INFO " + answer + " after=36s failures=5 op=campaign",
			},
		},
		{
			name:  "just under the interval stays quiet",
			steps: []step{fail(0, "renew"), fail(elector.StoreLogInterval-time.Nanosecond, "renew")},
			want:  []string{"WARN " + failed + " class=other op=renew", "DEBUG " + again + " class=other op=renew"},
		},
		{
			name:  "attributes are passed on",
			steps: []step{fail(0, "renew", "lease", 7), fail(time.Second, "renew", "lease", 7)},
			want:  []string{"WARN " + failed + " class=other lease=7 op=renew", "DEBUG " + again + " class=other lease=7 op=renew"},
		},
		{
			name:  "ops are reported apart",
			steps: []step{fail(0, "renew"), fail(0, "watch"), ok(time.Second, "renew"), fail(time.Second, "watch")},
			want: []string{
				"WARN " + failed + " class=other op=renew", "WARN " + failed + " class=other op=watch",
				"INFO " + answer + " after=1s failures=1 op=renew", "DEBUG " + again + " class=other op=watch",
			},
		},
		{
			name: "flapping: outages within the interval are neither announced nor ended",
			steps: []step{
				fail(0, "watch"), ok(0, "watch"),
				fail(time.Second, "watch"), ok(0, "watch"),
				fail(time.Second, "watch"), ok(0, "watch"),
				fail(28*time.Second, "watch"), ok(time.Second, "watch"),
			},
			want: []string{
				"WARN " + failed + " class=other op=watch", "INFO " + answer + " after=0s failures=1 op=watch",
				"DEBUG " + again + " class=other op=watch", "DEBUG " + again + " class=other op=watch",
				"WARN " + failed + " class=other op=watch suppressed=2", "INFO " + answer + " after=1s failures=1 op=watch",
			},
		},
		{
			name: "an outage left unannounced is warned about within the interval",
			steps: []step{
				fail(0, "watch"), ok(0, "watch"),
				fail(time.Second, "watch"), fail(10*time.Second, "watch"), fail(19*time.Second, "watch"),
				ok(time.Second, "watch"),
			},
			want: []string{
				"WARN " + failed + " class=other op=watch", "INFO " + answer + " after=0s failures=1 op=watch",
				"DEBUG " + again + " class=other op=watch", "DEBUG " + again + " class=other op=watch",
				"WARN " + failed + " class=other failures=3 for=29s op=watch suppressed=2",
				"INFO " + answer + " after=30s failures=3 op=watch",
			},
		},
		{
			name: "each class of error warns at once, then at its own rate",
			steps: []step{
				failAs(0, "renew", "MISCONF"), failAs(time.Second, "renew", "MISCONF"),
				failAs(time.Second, "renew", "READONLY"), failAs(time.Second, "renew", "MISCONF"),
				failAs(time.Second, "renew", "READONLY"), ok(time.Second, "renew"),
			},
			want: []string{
				"WARN " + failed + " class=MISCONF op=renew",
				"DEBUG " + again + " class=MISCONF op=renew",
				"WARN " + still + " class=READONLY failures=3 for=2s op=renew",
				"DEBUG " + again + " class=MISCONF op=renew",
				"DEBUG " + again + " class=READONLY op=renew",
				"INFO " + answer + " after=5s failures=5 op=renew",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1000, 0))
			logs, log := electortest.NewLogs()
			sl := elector.NewStoreLog(clk, log, nil)
			for i, s := range tt.steps {
				clk.Advance(s.wait)
				if s.fail {
					err := fmt.Errorf("step %d: %w", i, errStore)
					if s.class != "" {
						err = elector.Classify(s.class, err)
					}
					sl.Failed(s.op, err, s.attrs...)
				} else {
					sl.Answered(s.op)
				}
			}
			var got []string
			for _, ln := range logs.Lines(nil) {
				got = append(got, render(ln))
				if strings.Contains(ln.Msg, "fail") && !errors.Is(ln.Attrs["err"].Any().(error), errStore) {
					t.Errorf("line %q: err = %v, want the store's error", ln.Msg, ln.Attrs["err"])
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("lines:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

var errStore = errors.New("connection refused")

// countingInstrument records what a StoreLog tells its Instrument.
type countingInstrument struct {
	elector.NopInstrument
	errors   []string // "op class"
	answered []string
}

func (c *countingInstrument) StoreError(op string, err error) {
	c.errors = append(c.errors, op+" "+elector.ErrorClass(err))
}
func (c *countingInstrument) StoreAnswered(op string) { c.answered = append(c.answered, op) }

func TestStoreLogInstrument(t *testing.T) {
	in := &countingInstrument{}
	sl := elector.NewStoreLog(clock.NewFake(time.Unix(1000, 0)), nil, in)
	sl.Answered("renew") // not failing: nothing to say
	sl.Failed("renew", elector.Classify("OOM", errStore))
	sl.Failed("renew", errStore)
	sl.Answered("renew")
	sl.Answered("renew")
	sl.Failed("leave", errStore)
	sl.GaveUp("leave")
	sl.GaveUp("leave")
	if want := []string{"renew OOM", "renew other", "leave other"}; !slices.Equal(in.errors, want) {
		t.Errorf("StoreError calls = %q, want %q", in.errors, want)
	}
	if want := []string{"renew", "leave"}; !slices.Equal(in.answered, want) {
		t.Errorf("StoreAnswered calls = %q, want %q", in.answered, want)
	}
}

func TestErrorClass(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"classified", fmt.Errorf("renew: %w", elector.Classify("MISCONF", errStore)), "MISCONF"},
		{"timeout", fmt.Errorf("renew: %w", context.DeadlineExceeded), elector.ClassTimeout},
		{"canceled", context.Canceled, elector.ClassCanceled},
		{"unknown", errStore, elector.ClassOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := elector.ErrorClass(tt.err); got != tt.want {
				t.Errorf("ErrorClass(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
	if elector.Classify("X", nil) != nil {
		t.Error("Classify(class, nil) != nil")
	}
}
