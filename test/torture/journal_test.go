package torture

import (
	"fmt"
	"time"

	"github.com/electd/electd/test/record"
)

// journal follows the shared record log as it grows: it parses each new
// complete line once, keeps every run and every worker, feeds every line to
// the fenced resource in the order the lines reached the file, and splits
// the runs of paused children (with their workers) at the moment they were
// resumed. It is used from the test goroutine only.
type journal struct {
	path    string
	tail    record.Tail // what has been read of the log
	lines   int
	runs    []*record.Run       // in the order of their start lines
	open    map[int]*record.Run // pid -> its latest run
	terms   map[term]*record.Run
	workers []*worker // in the order of their first lines
	byKey   map[record.WorkerKey]*worker
	fence   fence
	pauses  map[*record.Run]*pause
	torn    []tornLine
}

// tornLine is the fragment of a line whose writer was killed during its
// write(2), and the file offset where it broke off (the kernel ends such a
// write at a page boundary: a multiple of 4096).
type tornLine struct {
	fragment string
	end      int64
}

// term names a run by its node and token: in the torture every term has a
// token of its own and runs one child (no restarts in place).
type term struct {
	node  string
	token uint64
}

// worker is one worker process of a child's tree, as the log shows it.
type worker struct {
	record.Worker
	run *record.Run // the run that started it (same node and token)
	// preLast is, for a worker of a paused run, its last line stamped
	// before the run was resumed.
	preLast time.Time
	// orphan: it was found alive after its term had ended (counted once).
	orphan bool
}

// pause is one SIGSTOP of a leader's electd and child, SIGCONT at resumed.
// Lines the child stamped before resumed belong to its term; lines from
// resumed on are the stale window, when its lease may already have lapsed.
type pause struct {
	run              *record.Run
	stopped, resumed time.Time
	preEnd           time.Time // its last line stamped before resumed
	staleLines       int       // lines stamped at or after resumed
	staleEnd         time.Time // the last of them
	// Writes to the fenced resource after a higher token had written (in
	// file order), and how many of those the fence rejected.
	afterNewer, rejected int
}

// window is how long the child ran after it was resumed (0: not at all).
func (p *pause) window() time.Duration {
	if p.staleLines == 0 {
		return 0
	}
	return p.staleEnd.Sub(p.resumed)
}

func newJournal(path string) *journal {
	return &journal{path: path, tail: record.Tail{Path: path}, open: map[int]*record.Run{}, terms: map[term]*record.Run{},
		byKey: map[record.WorkerKey]*worker{}, pauses: map[*record.Run]*pause{}}
}

// sync reads what was appended since the last call.
func (j *journal) sync() error {
	return j.tail.Read(func(text string, at int64) error {
		j.lines++
		if err := j.add(text, at); err != nil {
			return fmt.Errorf("%s line %d %q: %w", j.path, j.lines, text, err)
		}
		return nil
	})
}

// add applies one line of the file, which starts at offset at. A torn line
// (record.SplitTorn: a writer SIGKILLed during its write) is dropped, kept
// in j.torn with the offset where it broke off, and the line after it is
// applied.
func (j *journal) add(text string, at int64) error {
	l, err := record.ParseLine(text)
	if err != nil {
		frag, next, ok := record.SplitTorn(text)
		if !ok {
			return err
		}
		j.torn = append(j.torn, tornLine{fragment: frag, end: at + int64(len(frag))})
		l = next
	}
	var (
		r *record.Run
		w *worker
	)
	switch l.Kind {
	case record.KindStart:
		r = &record.Run{Node: l.Node, Token: l.Token, Pid: l.Pid, Start: l.At}
		j.open[l.Pid] = r
		j.runs = append(j.runs, r)
		j.terms[term{l.Node, l.Token}] = r
	case record.KindWorker:
		if w = j.byKey[record.KeyOf(l)]; w == nil {
			w = &worker{run: j.terms[term{l.Node, l.Token}]}
			if w.run == nil {
				return fmt.Errorf("worker line of token %d before any start line of %s with it", l.Token, l.Node)
			}
			j.byKey[record.KeyOf(l)] = w
			j.workers = append(j.workers, w)
		}
		if err := w.Add(l); err != nil {
			return err
		}
		r = w.run
	default:
		r = j.open[l.Pid]
		if err := r.Add(l); err != nil {
			return err
		}
	}
	newer := j.fence.highest > l.Token
	accepted := j.fence.write(l.Token)
	if p := j.pauses[r]; p != nil {
		if l.At.Before(p.resumed) {
			switch {
			case w != nil && l.At.After(w.preLast):
				w.preLast = l.At
			case w == nil && l.At.After(p.preEnd):
				p.preEnd = l.At
			}
		} else {
			p.staleLines++
			p.staleEnd = l.At
		}
		if newer {
			p.afterNewer++
			if !accepted {
				p.rejected++
			}
		}
	} else if !accepted {
		if j.fence.wrongful++; j.fence.wrongful <= 3 {
			j.fence.examples = append(j.fence.examples, fmt.Sprintf("%s %s write at %s (token %d) after token %d had written",
				l.Node, l.Kind, l.At.Format("15:04:05.000000"), l.Token, j.fence.highest))
		}
	}
	return nil
}

// paused registers r's child (and its workers) as resumed at resumed (call
// it before SIGCONT, so that every line stamped later is seen as stale).
func (j *journal) paused(r *record.Run, stopped, resumed time.Time) *pause {
	p := &pause{run: r, stopped: stopped, resumed: resumed, preEnd: r.End()}
	j.pauses[r] = p
	for _, w := range j.workersOf(r) {
		w.preLast = w.Last
	}
	return p
}

// workersOf are the workers of r's tree seen so far.
func (j *journal) workersOf(r *record.Run) []*worker {
	var out []*worker
	for _, w := range j.workers {
		if w.run == r {
			out = append(out, w)
		}
	}
	return out
}

// treeEnd is the last moment any process of r's tree was known alive: the
// later of its run's end and its workers' last lines (for a paused run,
// those stamped before it was resumed).
func (j *journal) treeEnd(r *record.Run) time.Time {
	end := r.End()
	p := j.pauses[r]
	if p != nil {
		end = p.preEnd
	}
	for _, w := range j.workersOf(r) {
		last := w.Last
		if p != nil {
			last = w.preLast
		}
		if last.After(end) {
			end = last
		}
	}
	return end
}

// run returns the latest run of pid.
func (j *journal) run(pid int) *record.Run { return j.open[pid] }

// next returns the first run, in start order, that started after prev and
// carries a higher token.
func (j *journal) next(prev *record.Run) *record.Run {
	var best *record.Run
	for _, r := range j.runs {
		if r.Token > prev.Token && r.Start.After(prev.Start) && (best == nil || r.Start.Before(best.Start)) {
			best = r
		}
	}
	return best
}

// adjusted returns copies of the runs and workers for the overlap check: a
// paused run, and each of its workers, ends at its last line before it was
// resumed (its stale window is judged by the fence instead).
func (j *journal) adjusted() record.Log {
	lg := record.Log{Runs: make([]record.Run, 0, len(j.runs)), Workers: make([]record.Worker, 0, len(j.workers))}
	for _, r := range j.runs {
		c := *r
		if p := j.pauses[r]; p != nil {
			c.Stop, c.Exit, c.LastBeat = time.Time{}, time.Time{}, p.preEnd
			if !c.LastBeat.After(c.Start) {
				c.LastBeat = time.Time{}
			}
		}
		lg.Runs = append(lg.Runs, c)
	}
	for _, w := range j.workers {
		c := w.Worker
		if j.pauses[w.run] != nil {
			if w.preLast.IsZero() {
				continue // it wrote only after the resume: the fence judges it
			}
			c.Last = w.preLast
		}
		lg.Workers = append(lg.Workers, c)
	}
	return lg
}

// fence is the fenced resource that the children's writes go to: every
// record line is a write carrying the writer's token, and lines reach the
// file in the order the writes happened. It accepts a write only if its
// token is at least the highest it has seen, as a store checking
// ELECTD_FENCING_TOKEN would.
type fence struct {
	highest            uint64
	accepted, rejected int
	// wrongful counts rejected writes of children that were never paused
	// (two terms wrote interleaved: a safety violation); examples are the
	// first few.
	wrongful int
	examples []string
}

func (f *fence) write(token uint64) bool {
	if token < f.highest {
		f.rejected++
		return false
	}
	f.highest = token
	f.accepted++
	return true
}
