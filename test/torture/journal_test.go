package torture

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/electd/electd/test/record"
)

// journal follows the shared record log as it grows: it parses each new
// complete line once, keeps every run, feeds every line to the fenced
// resource in the order the lines reached the file, and splits the runs of
// paused children at the moment they were resumed. It is used from the test
// goroutine only.
type journal struct {
	path    string
	off     int64
	partial []byte
	lines   int
	runs    []*record.Run       // in the order of their start lines
	open    map[int]*record.Run // pid -> its latest run
	fence   fence
	pauses  map[*record.Run]*pause
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
	return &journal{path: path, open: map[int]*record.Run{}, pauses: map[*record.Run]*pause{}}
}

// sync reads what was appended since the last call.
func (j *journal) sync() error {
	f, err := os.Open(j.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(j.off, io.SeekStart); err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	j.off += int64(len(b))
	data := append(j.partial, b...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		j.lines++
		if err := j.add(string(data[:i])); err != nil {
			return fmt.Errorf("%s line %d %q: %w", j.path, j.lines, data[:i], err)
		}
		data = data[i+1:]
	}
	j.partial = append([]byte(nil), data...) // a line still being written
	return nil
}

func (j *journal) add(text string) error {
	l, err := record.ParseLine(text)
	if err != nil {
		return err
	}
	var r *record.Run
	if l.Kind == record.KindStart {
		r = &record.Run{Node: l.Node, Token: l.Token, Pid: l.Pid, Start: l.At}
		j.open[l.Pid] = r
		j.runs = append(j.runs, r)
	} else {
		r = j.open[l.Pid]
		if err := r.Add(l); err != nil {
			return err
		}
	}
	newer := j.fence.highest > l.Token
	accepted := j.fence.write(l.Token)
	if p := j.pauses[r]; p != nil {
		if l.At.Before(p.resumed) {
			if l.At.After(p.preEnd) {
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

// paused registers r's child as resumed at resumed (call it before
// SIGCONT, so that every line stamped later is seen as stale).
func (j *journal) paused(r *record.Run, stopped, resumed time.Time) *pause {
	p := &pause{run: r, stopped: stopped, resumed: resumed, preEnd: r.End()}
	j.pauses[r] = p
	return p
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

// adjusted returns copies of the runs for the overlap check: a paused run
// ends at its last line before it was resumed (its stale window is judged
// by the fence instead).
func (j *journal) adjusted() []record.Run {
	out := make([]record.Run, 0, len(j.runs))
	for _, r := range j.runs {
		c := *r
		if p := j.pauses[r]; p != nil {
			c.Stop, c.Exit, c.LastBeat = time.Time{}, time.Time{}, p.preEnd
			if !c.LastBeat.After(c.Start) {
				c.LastBeat = time.Time{}
			}
		}
		out = append(out, c)
	}
	return out
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
