// Package record is the shared format of the child record log written by
// test/recorder, and a checker for it.
//
// Every copy of the recorder (the child that electd runs in the end-to-end
// tests) appends lines to one log file, with O_APPEND and one write(2) per
// line, so lines of concurrent writers never interleave. A line is
//
//	KIND NODE TOKEN PID UNIXNANOS [EXTRA]
//
// where NODE is $ELECTD_ID, TOKEN is $ELECTD_FENCING_TOKEN, PID the
// recorder's pid and UNIXNANOS the wall clock when the line was written.
// Kinds:
//
//	start       the recorder began (first line of a run)
//	beat        every few milliseconds while it runs
//	stop        it got SIGTERM and exits with 0 right after this line
//	term        it got SIGTERM and ignores it (RECORD_IGNORE_TERM=1)
//	exit        it exits on its own; EXTRA is the code, or -N for "kills
//	            itself with signal N"
//	grandchild  it started a grandchild; EXTRA is the grandchild's pid
//
// All writers run on one host, so their wall clocks agree. Times are those of
// the lines, so a run's recorded interval lies within the process's real life:
// it starts a little after exec and, for a run killed with SIGKILL, ends at
// its last beat, at most one beat period before it really died.
package record

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Line kinds.
const (
	KindStart      = "start"
	KindBeat       = "beat"
	KindStop       = "stop"
	KindTerm       = "term"
	KindExit       = "exit"
	KindGrandchild = "grandchild"
)

// Format renders one line, newline included. extra may be empty.
func Format(kind, node, token string, pid int, at time.Time, extra string) string {
	if node == "" {
		node = "-"
	}
	if token == "" {
		token = "-"
	}
	s := fmt.Sprintf("%s %s %s %d %d", kind, node, token, pid, at.UnixNano())
	if extra != "" {
		s += " " + extra
	}
	return s + "\n"
}

// Run is one life of a recorder process, from its start line on.
type Run struct {
	Node  string
	Token uint64
	Pid   int
	Start time.Time
	// LastBeat is the time of the last line of any kind (zero: none after
	// start).
	LastBeat time.Time
	// Stop is when it exited on SIGTERM; Exit when it exited on its own,
	// with ExitCode (negative: killed itself with that signal). Zero: not
	// (yet) recorded.
	Stop, Exit time.Time
	ExitCode   int
	// Terms are the SIGTERMs it ignored.
	Terms []time.Time
	// Grandchildren are the pids of the processes it started.
	Grandchildren []int
}

// Ended reports whether the run recorded its own end (stop or exit line). A
// run killed with SIGKILL never does.
func (r Run) Ended() bool { return !r.Stop.IsZero() || !r.Exit.IsZero() }

// End is the last moment the run is known to have been alive: its stop or
// exit line, else its last line of any kind.
func (r Run) End() time.Time {
	switch {
	case !r.Stop.IsZero():
		return r.Stop
	case !r.Exit.IsZero():
		return r.Exit
	case !r.LastBeat.IsZero():
		return r.LastBeat
	}
	return r.Start
}

func (r Run) String() string {
	end := "running"
	switch {
	case !r.Stop.IsZero():
		end = "stop@" + stamp(r.Stop)
	case !r.Exit.IsZero():
		end = fmt.Sprintf("exit(%d)@%s", r.ExitCode, stamp(r.Exit))
	case !r.LastBeat.IsZero():
		end = "last-beat@" + stamp(r.LastBeat)
	}
	return fmt.Sprintf("%s token=%d pid=%d start@%s %s", r.Node, r.Token, r.Pid, stamp(r.Start), end)
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }

// ReadFile parses the log at path; a missing file is an empty log.
func ReadFile(path string) ([]Run, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(bytes.NewReader(b))
}

// Parse reads a log into runs, in start order. A last line without its
// newline is being written and is ignored.
func Parse(r io.Reader) ([]Run, error) {
	var (
		runs []*Run
		open = map[int]*Run{} // pid -> its latest run
		br   = bufio.NewReader(r)
	)
	for n := 1; ; n++ {
		text, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) {
			break // a partial line, if any, is still being written
		}
		if err != nil {
			return nil, err
		}
		if err := parseLine(strings.TrimSuffix(text, "\n"), open, &runs); err != nil {
			return nil, fmt.Errorf("record line %d %q: %w", n, strings.TrimSpace(text), err)
		}
	}
	out := make([]Run, len(runs))
	for i, r := range runs {
		out[i] = *r
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

func parseLine(text string, open map[int]*Run, runs *[]*Run) error {
	l, err := ParseLine(text)
	if err != nil {
		return err
	}
	if l.Kind == KindStart {
		r := &Run{Node: l.Node, Token: l.Token, Pid: l.Pid, Start: l.At}
		open[l.Pid] = r
		*runs = append(*runs, r)
		return nil
	}
	return open[l.Pid].Add(l)
}

// Line is one parsed line of the log.
type Line struct {
	Kind  string
	Node  string
	Token uint64
	Pid   int
	At    time.Time
	Extra string // empty when the line has none
}

// ParseLine parses one line of the log, without its newline. It checks the
// fields, not the kind: see Run.Add.
func ParseLine(text string) (Line, error) {
	f := strings.Fields(text)
	if len(f) < 5 || len(f) > 6 {
		return Line{}, errors.New("want KIND NODE TOKEN PID UNIXNANOS [EXTRA]")
	}
	l := Line{Kind: f[0], Node: f[1]}
	var err error
	if l.Token, err = strconv.ParseUint(f[2], 10, 64); err != nil {
		return Line{}, fmt.Errorf("token: %w", err)
	}
	if l.Pid, err = strconv.Atoi(f[3]); err != nil {
		return Line{}, fmt.Errorf("pid: %w", err)
	}
	ns, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		return Line{}, fmt.Errorf("time: %w", err)
	}
	l.At = time.Unix(0, ns)
	if len(f) == 6 {
		l.Extra = f[5]
	}
	return l, nil
}

// Add applies a line other than a start line to the run it belongs to (the
// latest run of its pid; r may be nil when there is none), as Parse does. It
// is for readers that follow a growing log line by line.
func (r *Run) Add(l Line) error {
	if r == nil || r.Pid != l.Pid || r.Node != l.Node || r.Token != l.Token {
		return fmt.Errorf("no start line for pid %d (%s, token %d) before it", l.Pid, l.Node, l.Token)
	}
	r.LastBeat = l.At
	var err error
	switch l.Kind {
	case KindBeat:
	case KindStop:
		r.Stop = l.At
	case KindTerm:
		r.Terms = append(r.Terms, l.At)
	case KindExit:
		if r.ExitCode, err = strconv.Atoi(l.Extra); err != nil {
			return fmt.Errorf("exit code: %w", err)
		}
		r.Exit = l.At
	case KindGrandchild:
		gc, err := strconv.Atoi(l.Extra)
		if err != nil {
			return fmt.Errorf("grandchild pid: %w", err)
		}
		r.Grandchildren = append(r.Grandchildren, gc)
	case KindStart:
		return errors.New("a start line begins a new run")
	default:
		return fmt.Errorf("unknown kind %q", l.Kind)
	}
	return nil
}

// Options relax Check.
type Options struct {
	// AllowRestarts admits consecutive runs with the same token when they
	// belong to the same node: a child restarted in place within one term
	// (--on-exit=restart).
	AllowRestarts bool
}

// Check proves the safety properties of a log: no two runs overlap (each
// run's interval is Start..End) and fencing tokens strictly increase in start
// order. It returns every violation found, joined.
func Check(runs []Run, opt Options) error {
	sorted := append([]Run(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Start.Before(sorted[j].Start) })
	var errs []error
	latest := -1 // index of the run with the latest End so far
	for i, r := range sorted {
		if latest >= 0 {
			if prev := sorted[latest]; !r.Start.After(prev.End()) {
				errs = append(errs, fmt.Errorf("overlap: [%s] started %s before [%s] ended",
					r, prev.End().Sub(r.Start), prev))
			}
		}
		if latest < 0 || r.End().After(sorted[latest].End()) {
			latest = i
		}
		if i == 0 {
			continue
		}
		prev := sorted[i-1]
		switch {
		case r.Token > prev.Token:
		case r.Token == prev.Token && opt.AllowRestarts && r.Node == prev.Node:
		default:
			errs = append(errs, fmt.Errorf("token order: [%s] started after [%s]", r, prev))
		}
	}
	return errors.Join(errs...)
}
