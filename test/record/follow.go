package record

import (
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"sort"
)

// Tail reads a growing log from where its last Read stopped, so that a
// reader that follows a log while the recorders write it (each running
// child makes it grow by about 10 KB/s) never reads it again from the
// start. The zero Tail with a Path reads the file from its beginning.
type Tail struct {
	Path string

	off  int64  // bytes of the file read so far
	part []byte // what was read after the last newline: a line being written
}

// Read hands fn each complete line appended since the last call, without
// its newline, with the offset in the file where the line begins. A last
// line without its newline is being written: it is kept for the next call.
// A missing file has no lines yet. Read stops at fn's first error and
// returns it; the next call goes on with the line after that one.
func (t *Tail) Read(fn func(text string, at int64) error) error {
	f, err := os.Open(t.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	t.off += int64(len(b))
	data := append(t.part, b...)
	at := t.off - int64(len(data)) // the file offset of data[0]
	defer func() { t.part = append([]byte(nil), data...) }()
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil
		}
		text := string(data[:i])
		lineAt := at
		data, at = data[i+1:], at+int64(i+1)
		if err := fn(text, lineAt); err != nil {
			return err
		}
	}
}

// Builder makes a Log of lines given one at a time, as ParseAll does: for
// readers that follow a growing log (see Tail). The zero Builder is an
// empty log.
type Builder struct {
	runs    []*Run
	open    map[int]*Run // pid -> its latest run
	workers map[WorkerKey]*Worker
	order   []*Worker
	torn    []string
}

// Add applies one line of the log, without its newline. A torn line (see
// SplitTorn) is dropped, its fragment kept in Log.Torn, and the complete
// line after it applied. A line that is not a valid one of the log is an
// error and changes nothing.
func (b *Builder) Add(text string) error {
	l, err := ParseLine(text)
	if err != nil {
		frag, next, ok := SplitTorn(text)
		if !ok {
			return err
		}
		if err := b.apply(next); err != nil {
			return err
		}
		b.torn = append(b.torn, frag)
		return nil
	}
	return b.apply(l)
}

func (b *Builder) apply(l Line) error {
	switch l.Kind {
	case KindStart:
		if b.open == nil {
			b.open = map[int]*Run{}
		}
		r := &Run{Node: l.Node, Token: l.Token, Pid: l.Pid, Start: l.At}
		b.open[l.Pid] = r
		b.runs = append(b.runs, r)
		return nil
	case KindWorker:
		k := KeyOf(l)
		w, known := b.workers[k]
		if !known {
			w = &Worker{}
		}
		if err := w.Add(l); err != nil {
			return err
		}
		if !known {
			if b.workers == nil {
				b.workers = map[WorkerKey]*Worker{}
			}
			b.workers[k] = w
			b.order = append(b.order, w)
		}
		return nil
	}
	r := b.open[l.Pid]
	if r == nil {
		return r.Add(l) // the error of a line without its start line
	}
	next := *r // Run.Add may fail after a first change: apply it to a copy
	if err := next.Add(l); err != nil {
		return err
	}
	*r = next
	return nil
}

// Log is the log so far, as ParseAll returns it: runs in start order,
// workers in the order of their first line. It is a copy: later lines do
// not change it.
func (b *Builder) Log() Log {
	lg := Log{Runs: make([]Run, len(b.runs)), Workers: make([]Worker, len(b.order)), Torn: slices.Clone(b.torn)}
	for i, r := range b.runs {
		c := *r
		c.Terms, c.Grandchildren, c.Spawned = slices.Clone(r.Terms), slices.Clone(r.Grandchildren), slices.Clone(r.Spawned)
		lg.Runs[i] = c
	}
	for i, w := range b.order {
		lg.Workers[i] = *w
	}
	sort.SliceStable(lg.Runs, func(i, j int) bool { return lg.Runs[i].Start.Before(lg.Runs[j].Start) })
	sort.SliceStable(lg.Workers, func(i, j int) bool { return lg.Workers[i].First.Before(lg.Workers[j].First) })
	return lg
}
