package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	pidwatch "github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// recLog follows one record log (test/record: the lines the recorder
// children write) while they write it: record.Tail reads only what was
// appended since the last poll, record.Builder makes the runs of it.
type recLog struct {
	path string

	mu   sync.Mutex
	tail record.Tail
	log  record.Builder
	bad  error // the first line that is not one of a record log (skipped)
}

func newRecLog(path string) *recLog { return &recLog{path: path, tail: record.Tail{Path: path}} }

// poll reads what was appended since the last call. A line that is not one
// of a record log is skipped; the first one is named when a wait fails.
func (l *recLog) poll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tail.Read(func(text string, at int64) error {
		if err := l.log.Add(text); err != nil && l.bad == nil {
			l.bad = fmt.Errorf("skipped the line at offset %d, %q: %w", at, text, err)
		}
		return nil
	})
}

// snapshot returns copies of the runs so far, in start order.
func (l *recLog) snapshot() []record.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.log.Log().Runs
}

// waitRun polls until a run matches, and returns it.
func (l *recLog) waitRun(ctx context.Context, d time.Duration, what string, match func(record.Run) bool) (record.Run, error) {
	var found record.Run
	err := waitUntil(ctx, d, func() bool {
		if err := l.poll(); err != nil {
			return false
		}
		for _, r := range l.snapshot() {
			if match(r) {
				found = r
				return true
			}
		}
		return false
	})
	if err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.bad != nil {
			return found, fmt.Errorf("%s: %w (log %s; %v)", what, err, l.path, l.bad)
		}
		return found, fmt.Errorf("%s: %w (log %s)", what, err, l.path)
	}
	return found, nil
}

// nextRun waits for the first run that started after prev on another node:
// the successor of prev.
func (l *recLog) nextRun(ctx context.Context, d time.Duration, what string, prev record.Run) (record.Run, error) {
	return l.waitRun(ctx, d, what, func(r record.Run) bool {
		return r.Start.After(prev.Start) && r.Node != prev.Node
	})
}

// get returns the current state of the latest run with pid.
func (l *recLog) get(pid int) (record.Run, bool) {
	_ = l.poll()
	runs := l.snapshot()
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Pid == pid {
			return runs[i], true
		}
	}
	return record.Run{}, false
}

// current is the latest-started run that has not ended and is alive.
func (l *recLog) current() (record.Run, bool) {
	_ = l.poll()
	runs := l.snapshot()
	for i := len(runs) - 1; i >= 0; i-- {
		if !runs[i].Ended() && pidwatch.Alive(runs[i].Pid) {
			return runs[i], true
		}
	}
	return record.Run{}, false
}

// overlaps describes every pair of runs whose intervals intersect
// (start..end), for the safety check.
func (l *recLog) overlaps() []error {
	_ = l.poll()
	return record.Overlaps(l.snapshot())
}

// killRecorders SIGKILLs every recorder of the log that still runs (a
// command etcdctl left behind, a child of a killed electd).
func (l *recLog) killRecorders(recorder string) {
	_ = l.poll()
	for _, r := range l.snapshot() {
		killIfOurs(r.Pid, recorder)
	}
}
