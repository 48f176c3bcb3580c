package main

import (
	"bytes"
	"context"
	"fmt"
	pidwatch "github.com/electd/electd/test/proc"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// run is one life of a recorder child (see test/record for the format:
// KIND NODE TOKEN PID UNIXNANOS [EXTRA]).
type run struct {
	node     string
	token    string
	pid      int
	start    time.Time
	lastBeat time.Time
	stop     time.Time // SIGTERM
	exit     time.Time // on its own
}

func (r *run) ended() bool { return !r.stop.IsZero() || !r.exit.IsZero() }

// end is its stop or exit line, else its last line.
func (r *run) end() time.Time {
	switch {
	case !r.stop.IsZero():
		return r.stop
	case !r.exit.IsZero():
		return r.exit
	case !r.lastBeat.IsZero():
		return r.lastBeat
	}
	return r.start
}

func (r *run) String() string {
	return fmt.Sprintf("%s token=%s pid=%d start=%s", r.node, r.token, r.pid, r.start.Format("15:04:05.000000"))
}

// recLog tails one record log incrementally: beats make the file grow by
// about 10 KB/s per running child, so it is never re-read from the start.
type recLog struct {
	path string

	mu   sync.Mutex
	off  int64
	part []byte
	runs []*run       // in start order
	byID map[int]*run // pid -> latest run
}

func newRecLog(path string) *recLog { return &recLog{path: path, byID: map[int]*run{}} }

// poll reads what was appended since the last call.
func (l *recLog) poll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.Open(l.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	l.off += int64(len(b))
	b = append(l.part, b...)
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		l.part = b
		return nil
	}
	l.part = append([]byte(nil), b[i+1:]...)
	for _, line := range strings.Split(string(b[:i]), "\n") {
		l.parse(line)
	}
	return nil
}

func (l *recLog) parse(line string) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return
	}
	pid, err1 := strconv.Atoi(f[3])
	ns, err2 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	at := time.Unix(0, ns)
	if f[0] == "start" {
		r := &run{node: f[1], token: f[2], pid: pid, start: at}
		l.runs = append(l.runs, r)
		l.byID[pid] = r
		return
	}
	r := l.byID[pid]
	if r == nil {
		return
	}
	r.lastBeat = at
	switch f[0] {
	case "stop":
		r.stop = at
	case "exit":
		r.exit = at
	}
}

// snapshot returns copies of the runs so far, in start order.
func (l *recLog) snapshot() []run {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]run, len(l.runs))
	for i, r := range l.runs {
		out[i] = *r
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// waitRun polls until a run matches, and returns it.
func (l *recLog) waitRun(ctx context.Context, d time.Duration, what string, match func(run) bool) (run, error) {
	var found run
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
		return found, fmt.Errorf("%s: %w (log %s)", what, err, l.path)
	}
	return found, nil
}

// get returns the current state of the run with pid.
func (l *recLog) get(pid int) (run, bool) {
	_ = l.poll()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.byID[pid]
	if r == nil {
		return run{}, false
	}
	return *r, true
}

// current is the latest-started run that has not ended and is alive.
func (l *recLog) current() (run, bool) {
	_ = l.poll()
	runs := l.snapshot()
	for i := len(runs) - 1; i >= 0; i-- {
		if !runs[i].ended() && pidwatch.Alive(runs[i].pid) {
			return runs[i], true
		}
	}
	return run{}, false
}

// overlaps returns a description of every pair of runs whose intervals
// intersect (start..end), for the safety check.
func (l *recLog) overlaps() []string {
	_ = l.poll()
	runs := l.snapshot()
	var out []string
	latest := -1
	for i, r := range runs {
		if latest >= 0 && !r.start.After(runs[latest].end()) {
			out = append(out, fmt.Sprintf("[%s] started %s before [%s] ended", &runs[i], runs[latest].end().Sub(r.start), &runs[latest]))
		}
		if latest < 0 || r.end().After(runs[latest].end()) {
			latest = i
		}
	}
	return out
}
