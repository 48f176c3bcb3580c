package electortest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// LogLine is one record a Logs logger received. Attrs holds every attribute
// by its own key, without group prefixes (a backend's "etcd.op" is "op").
type LogLine struct {
	Level slog.Level
	Msg   string
	Attrs map[string]slog.Value
}

// Logs records what its Logger writes, at every level, so that tests can
// check and wait for log lines.
type Logs struct {
	mu      sync.Mutex
	lines   []LogLine
	changed chan struct{} // closed and replaced at every line
}

// NewLogs returns an empty record and a logger (debug level) writing to it.
func NewLogs() (*Logs, *slog.Logger) {
	l := &Logs{changed: make(chan struct{})}
	return l, slog.New(&logsHandler{logs: l})
}

// Lines returns the lines so far that match (all when match is nil).
func (l *Logs) Lines(match func(LogLine) bool) []LogLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LogLine
	for _, ln := range l.lines {
		if match == nil || match(ln) {
			out = append(out, ln)
		}
	}
	return out
}

// WaitFor waits until n lines match, at most within, and returns them.
func (l *Logs) WaitFor(t testing.TB, within time.Duration, n int, what string, match func(LogLine) bool) []LogLine {
	t.Helper()
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		if got := l.Lines(match); len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("timed out after %s waiting for %d log lines: %s; have %d", within, n, what, len(l.Lines(match)))
		}
	}
}

func (l *Logs) add(ln LogLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, ln)
	close(l.changed)
	l.changed = make(chan struct{})
}

// Line matches a line with level and message msg whose attribute key (if
// not empty) has the value val.
func Line(level slog.Level, msg, key, val string) func(LogLine) bool {
	return func(ln LogLine) bool {
		if ln.Level != level || ln.Msg != msg {
			return false
		}
		v, ok := ln.Attrs[key]
		return key == "" || ok && v.String() == val
	}
}

type logsHandler struct {
	logs  *Logs
	attrs []slog.Attr
}

func (h *logsHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logsHandler) Handle(_ context.Context, r slog.Record) error {
	ln := LogLine{Level: r.Level, Msg: r.Message, Attrs: map[string]slog.Value{}}
	var put func(a slog.Attr)
	put = func(a slog.Attr) {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			for _, g := range v.Group() {
				put(g)
			}
			return
		}
		ln.Attrs[a.Key] = v
	}
	for _, a := range h.attrs {
		put(a)
	}
	r.Attrs(func(a slog.Attr) bool { put(a); return true })
	h.logs.add(ln)
	return nil
}

func (h *logsHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logsHandler{logs: h.logs, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

// WithGroup drops the group's name: Attrs are keyed without prefixes.
func (h *logsHandler) WithGroup(string) slog.Handler { return h }

// The lines of elector.StoreLog.
const (
	storeFailed = "store request failed; retrying"
	storeStill  = "store request still failing; retrying"
	storeAgain  = "store request failed again; retrying"
	storeBack   = "store answers again"
)

// storeFailure matches every line elector.StoreLog writes for a failure of op.
func storeFailure(op string) func(LogLine) bool {
	return func(ln LogLine) bool {
		return Line(slog.LevelWarn, storeFailed, "op", op)(ln) || Line(slog.LevelWarn, storeStill, "op", op)(ln) ||
			Line(slog.LevelDebug, storeAgain, "op", op)(ln)
	}
}

// WaitStoreFailures waits until a backend's store requests of kind op have
// failed n times (as reported by elector.StoreLog), and checks that they
// were not all warned about: one warning, and one more for every
// elector.StoreLogInterval since start, when the outage began.
func (l *Logs) WaitStoreFailures(t testing.TB, within time.Duration, op string, n int, start time.Time) {
	t.Helper()
	l.WaitFor(t, within, n, "failures of "+op, storeFailure(op))
	allowed := 1 + int(time.Since(start)/elector.StoreLogInterval)
	warned := len(l.Lines(func(ln LogLine) bool { return ln.Level == slog.LevelWarn && storeFailure(op)(ln) }))
	if warned < 1 || warned > allowed {
		t.Fatalf("%d warnings about %d failures of %s, want 1 to %d:\n%s", warned, n, op, allowed, l.dump())
	}
}

// WaitStoreRecovery waits for the line saying that op answers again, and
// checks that it counts every failure reported before it.
func (l *Logs) WaitStoreRecovery(t testing.TB, within time.Duration, op string) {
	t.Helper()
	back := Line(slog.LevelInfo, storeBack, "op", op)
	l.WaitFor(t, within, 1, op+" answering again", back)
	failures := 0
	for _, ln := range l.Lines(nil) {
		if back(ln) {
			if got := ln.Attrs["failures"]; got.Kind() != slog.KindInt64 || got.Int64() != int64(failures) {
				t.Fatalf("%q failures=%v, want %d:\n%s", ln.Msg, got, failures, l.dump())
			}
			return
		}
		if storeFailure(op)(ln) {
			failures++
		}
	}
}

// dump renders the lines, for a failure message.
func (l *Logs) dump() string {
	var b strings.Builder
	for _, ln := range l.Lines(nil) {
		fmt.Fprintf(&b, "\t%s %q", ln.Level, ln.Msg)
		for k, v := range ln.Attrs {
			fmt.Fprintf(&b, " %s=%v", k, v)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
