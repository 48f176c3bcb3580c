// Package record is the shared format of the child record log written by
// test/recorder, and a checker for it.
//
// Every copy of the recorder (the child that electd runs in the end-to-end
// tests) and every worker it starts append lines to one log file, with
// O_APPEND and one write(2) per line, so lines of concurrent writers never
// interleave. A line is
//
//	KIND NODE TOKEN PID UNIXNANOS [EXTRA...]
//
// where NODE is $ELECTD_ID, TOKEN is $ELECTD_FENCING_TOKEN, PID the
// writer's pid and UNIXNANOS the wall clock when the line was written.
// Every pid is one of the host's PID namespace (the test's), even when
// electd runs the child in a namespace of its own. Kinds:
//
//	start       the recorder began (first line of a run)
//	beat        every few milliseconds while it runs
//	stop        it got SIGTERM and exits with 0 right after this line
//	term        it got SIGTERM and ignores it (RECORD_IGNORE_TERM=1)
//	exit        it exits on its own; EXTRA is the code, or -N for "kills
//	            itself with signal N"
//	grandchild  it started a grandchild; EXTRA is the grandchild's pid
//	spawned     it started a worker (RECORD_WORKERS=1); EXTRA is
//	            "WORKERPID ROLE", PID the recorder's
//	worker      a worker is alive: PID is the worker's own, EXTRA its ROLE
//	            (group, setsid or daemon); every few milliseconds until it
//	            dies, from its first moment on
//
// A worker inherits its recorder's NODE and TOKEN, and outlives it unless
// electd kills it: it belongs to the term of its token. So a term lives from
// its run's first line to the later of the run's end and the last line of
// any of its workers, and Check proves that no worker wrote at or after the
// first line of a later term.
//
// A writer killed by SIGKILL in the middle of its write(2) can leave a torn
// line: the kernel may end a write early at a page boundary of the file
// when a fatal signal is pending, so a prefix of the line reaches the file
// without its newline, and the next writer's whole line follows it. Parsers
// drop such a fragment (its writer died at that moment, within a beat of
// its last complete line), keep the complete line after it, and count the
// fragment in Log.Torn; SplitTorn tells one apart from a malformed line.
//
// All writers run on one host, so their wall clocks agree. Times are those of
// the lines, so a run's recorded interval lies within the process's real life:
// it starts a little after exec and, for a run killed with SIGKILL, ends at
// its last beat, at most one beat period before it really died. The same
// holds for a worker's first and last line.
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
	KindSpawned    = "spawned"
	KindWorker     = "worker"
)

// Worker roles: how a worker was started (see test/recorder).
const (
	RoleGroup  = "group"  // a plain child, in the recorder's process group
	RoleSetsid = "setsid" // a child in a session (and group) of its own
	RoleDaemon = "daemon" // double-forked and orphaned, in a session of its own
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
	// Spawned are the workers it started (spawned lines), in log order.
	Spawned []Spawn
}

// Spawn is one spawned line: a worker a run started.
type Spawn struct {
	Pid  int
	Role string
	At   time.Time
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

// Worker is the life of one worker process, from its worker lines.
type Worker struct {
	Node  string
	Token uint64
	Pid   int
	Role  string
	// First and Last are the times of its first and last worker line.
	First, Last time.Time
	// Lines is how many worker lines it wrote.
	Lines int
}

func (w Worker) String() string {
	return fmt.Sprintf("%s worker %s token=%d pid=%d first@%s last@%s", w.Node, w.Role, w.Token, w.Pid, stamp(w.First), stamp(w.Last))
}

// Add applies a worker line to w; a zero w takes the line's writer. It is
// for readers that follow a growing log line by line.
func (w *Worker) Add(l Line) error {
	if l.Kind != KindWorker {
		return fmt.Errorf("not a worker line: %q", l.Kind)
	}
	if l.Extra == "" || strings.Contains(l.Extra, " ") {
		return fmt.Errorf("worker role %q: want one word", l.Extra)
	}
	if w.Lines == 0 {
		*w = Worker{Node: l.Node, Token: l.Token, Pid: l.Pid, Role: l.Extra, First: l.At}
	} else if w.Pid != l.Pid || w.Node != l.Node || w.Token != l.Token || w.Role != l.Extra {
		return fmt.Errorf("worker line of pid %d (%s, token %d, %s) added to [%s]", l.Pid, l.Node, l.Token, l.Extra, w)
	}
	if l.At.After(w.Last) {
		w.Last = l.At
	}
	if l.At.Before(w.First) {
		w.First = l.At
	}
	w.Lines++
	return nil
}

// WorkerKey identifies a worker process in a log: a pid of one writer
// (pids are reused, so node and token are part of it).
type WorkerKey struct {
	Node  string
	Token uint64
	Pid   int
}

// Key is w's key.
func (w Worker) Key() WorkerKey { return WorkerKey{w.Node, w.Token, w.Pid} }

// KeyOf is the key of the worker that wrote worker line l.
func KeyOf(l Line) WorkerKey { return WorkerKey{l.Node, l.Token, l.Pid} }

// Log is a whole parsed log: the recorder runs and their workers.
type Log struct {
	Runs    []Run    // in start order
	Workers []Worker // in the order of their first line
	Torn    []string // fragments of torn lines, dropped (see SplitTorn)
}

// SplitTorn splits text (one line of the file, without its newline) that
// is a torn line followed by a complete one: the fragment a writer killed
// during its write left, then the whole line of the next writer. It
// reports false unless the rest after some fragment parses as a line of a
// known kind; a fragment is never empty.
func SplitTorn(text string) (fragment string, next Line, ok bool) {
	for i := 1; i < len(text); i++ {
		rest := text[i:]
		kind, _, _ := strings.Cut(rest, " ")
		if !knownKind(kind) {
			continue
		}
		if l, err := ParseLine(rest); err == nil {
			return text[:i], l, true
		}
	}
	return "", Line{}, false
}

func knownKind(k string) bool {
	switch k {
	case KindStart, KindBeat, KindStop, KindTerm, KindExit, KindGrandchild, KindSpawned, KindWorker:
		return true
	}
	return false
}

// RunOf is the run that started w: the run of w's node and token that has
// a spawned line for w's pid, else the latest run of w's node and token
// that started before w's first line.
func (lg Log) RunOf(w Worker) (Run, bool) {
	var (
		best  Run
		found bool
	)
	for _, r := range lg.Runs {
		if r.Node != w.Node || r.Token != w.Token {
			continue
		}
		for _, s := range r.Spawned {
			if s.Pid == w.Pid {
				return r, true
			}
		}
		if !r.Start.After(w.First) && (!found || r.Start.After(best.Start)) {
			best, found = r, true
		}
	}
	return best, found
}

// WorkersOf are the workers that run r started (see RunOf).
func (lg Log) WorkersOf(r Run) []Worker {
	var out []Worker
	for _, w := range lg.Workers {
		if p, ok := lg.RunOf(w); ok && p.Pid == r.Pid && p.Start.Equal(r.Start) {
			out = append(out, w)
		}
	}
	return out
}

// ReadFile parses the log at path into its runs; a missing file is an empty
// log. Worker lines are checked and left out: see ReadAll.
func ReadFile(path string) ([]Run, error) {
	lg, err := ReadAll(path)
	return lg.Runs, err
}

// ReadAll parses the log at path, runs and workers; a missing file is an
// empty log.
func ReadAll(path string) (Log, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Log{}, nil
	}
	if err != nil {
		return Log{}, err
	}
	return ParseAll(bytes.NewReader(b))
}

// Parse reads a log into runs, in start order, as ParseAll does.
func Parse(r io.Reader) ([]Run, error) {
	lg, err := ParseAll(r)
	return lg.Runs, err
}

// ParseAll reads a log: runs in start order, workers in the order of their
// first line. A last line without its newline is being written and is
// ignored.
func ParseAll(r io.Reader) (Log, error) {
	var (
		b  Builder
		br = bufio.NewReader(r)
	)
	for n := 1; ; n++ {
		text, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) {
			break // a partial line, if any, is still being written
		}
		if err != nil {
			return Log{}, err
		}
		if err := b.Add(strings.TrimSuffix(text, "\n")); err != nil {
			return Log{}, fmt.Errorf("record line %d %q: %w", n, strings.TrimSpace(text), err)
		}
	}
	return b.Log(), nil
}

// Line is one parsed line of the log.
type Line struct {
	Kind  string
	Node  string
	Token uint64
	Pid   int
	At    time.Time
	Extra string // the fields after UNIXNANOS, joined by one space; empty when none
}

// ParseLine parses one line of the log, without its newline. It checks the
// fields and that the kind is known, not the extra fields: see Run.Add and
// Worker.Add.
func ParseLine(text string) (Line, error) {
	f := strings.Fields(text)
	if len(f) < 5 || len(f) > 7 {
		return Line{}, errors.New("want KIND NODE TOKEN PID UNIXNANOS [EXTRA...]")
	}
	if !knownKind(f[0]) {
		return Line{}, fmt.Errorf("unknown kind %q", f[0])
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
	l.Extra = strings.Join(f[5:], " ")
	return l, nil
}

// Add applies a line other than a start or worker line to the run it
// belongs to (the latest run of its pid; r may be nil when there is none),
// as Parse does. It is for readers that follow a growing log line by line.
func (r *Run) Add(l Line) error {
	if l.Kind == KindWorker {
		return fmt.Errorf("a worker line (pid %d) belongs to a Worker, not a run", l.Pid)
	}
	if r == nil || r.Pid != l.Pid || r.Node != l.Node || r.Token != l.Token {
		return fmt.Errorf("no start line for pid %d (%s, token %d) before it", l.Pid, l.Node, l.Token)
	}
	if l.At.After(r.LastBeat) {
		// A spawned line of a daemon comes from the short-lived process
		// between the recorder and the daemon, and may be stamped before
		// a beat that reached the file first.
		r.LastBeat = l.At
	}
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
	case KindSpawned:
		pid, role, ok := strings.Cut(l.Extra, " ")
		if !ok || role == "" || strings.Contains(role, " ") {
			return fmt.Errorf("spawned %q: want WORKERPID ROLE", l.Extra)
		}
		s := Spawn{Role: role, At: l.At}
		if s.Pid, err = strconv.Atoi(pid); err != nil {
			return fmt.Errorf("worker pid: %w", err)
		}
		r.Spawned = append(r.Spawned, s)
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

// Check proves the safety properties of a log of runs without workers:
// Log{Runs: runs}.Check(opt).
func Check(runs []Run, opt Options) error { return Log{Runs: runs}.Check(opt) }

// Overlaps returns an error for every run that started before an earlier
// run (in start order) ended: no two runs may overlap, each run's interval
// being Start..End, ends included.
func Overlaps(runs []Run) []error {
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
	}
	return errs
}

// Check proves the safety properties of a log and returns every violation
// found, joined:
//
//   - no two runs overlap (Overlaps);
//   - fencing tokens strictly increase in start order;
//   - every worker belongs to a run of its node and token, and wrote its
//     last line before the first line of any later term (a run with a
//     greater token) and before the next run started: a term lives until
//     the last line of its last worker, and the whole tree must be gone
//     before the next one begins (a restart in place included).
func (lg Log) Check(opt Options) error {
	sorted := append([]Run(nil), lg.Runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Start.Before(sorted[j].Start) })
	errs := Overlaps(sorted)
	for i, r := range sorted {
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
	for _, w := range lg.Workers {
		parent, ok := lg.RunOf(w)
		if !ok {
			errs = append(errs, fmt.Errorf("token order: [%s] carries a token that no run of %s started before it had", w, w.Node))
		}
		// The first run of a later term, and the first run after w's own.
		var later, next *Run
		for i := range sorted {
			r := &sorted[i]
			if later == nil && r.Token > w.Token {
				later = r
			}
			if next == nil && ok && r.Start.After(parent.Start) {
				next = r
			}
		}
		switch {
		case later != nil && !w.Last.Before(later.Start):
			errs = append(errs, fmt.Errorf("overlap: [%s] wrote %s after the later term [%s] began (token %d after %d)",
				w, w.Last.Sub(later.Start), later, w.Token, later.Token))
		case next != nil && !w.Last.Before(next.Start):
			errs = append(errs, fmt.Errorf("overlap: [%s] wrote %s after the next run [%s] began",
				w, w.Last.Sub(next.Start), next))
		}
	}
	return errors.Join(errs...)
}
