// Package tree watches the process trees of the recorder (test/recorder
// with RECORD_WORKERS=1) through /proc and its record log, for the e2e and
// lock suites: which workers still run, when a whole tree is gone, and
// whether any worker of an old tree is alive at the moment a new run
// starts.
package tree

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// Roles is the number of workers a recorder starts: group, setsid, daemon.
const Roles = 3

// WorkerAlive reports whether pid is alive and is a worker writing to the
// record log at logPath (by its environment), so that a reused pid is
// never taken for one.
func WorkerAlive(pid int, logPath string) bool {
	if !proc.Alive(pid) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false // gone meanwhile
	}
	return slices.Contains(strings.Split(string(b), "\x00"), "RECORD_LOG="+logPath)
}

// Live describes the workers spawned by runs that are still alive; empty
// when none is.
func Live(runs []record.Run, logPath string) string {
	var alive []string
	for _, r := range runs {
		for _, sp := range r.Spawned {
			if WorkerAlive(sp.Pid, logPath) {
				alive = append(alive, fmt.Sprintf("%s worker %d of [%s]", sp.Role, sp.Pid, r))
			}
		}
	}
	return strings.Join(alive, "; ")
}

// Pids are the pids of every worker runs spawned.
func Pids(runs []record.Run) []int {
	var pids []int
	for _, r := range runs {
		for _, sp := range r.Spawned {
			pids = append(pids, sp.Pid)
		}
	}
	return pids
}

// Kill waits at most within for the workers of runs to be gone (a kill -9
// of electd may still be tearing a PID namespace down), then SIGKILLs
// those still alive and returns their pids.
func Kill(runs []record.Run, logPath string, within time.Duration) []int {
	_, _, alive := GoneAll(Pids(runs), within)
	var killed []int
	for _, pid := range alive {
		if WorkerAlive(pid, logPath) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, pid)
		}
	}
	return killed
}

// GoneAll waits at most within for every pid to be gone (or a zombie),
// polling them together every millisecond. It returns when each was seen
// gone, the latest of those moments, and the pids still alive.
func GoneAll(pids []int, within time.Duration) (map[int]time.Time, time.Time, []int) {
	gone := map[int]time.Time{}
	var last time.Time
	deadline := time.Now().Add(within)
	for {
		var alive []int
		for _, pid := range pids {
			if _, ok := gone[pid]; ok {
				continue
			}
			if proc.Alive(pid) {
				alive = append(alive, pid)
				continue
			}
			last = time.Now()
			gone[pid] = last
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return gone, last, alive
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
}

// Of is every live process under pid (its descendants in /proc, an init of
// electd's own included) and every worker of run, which may have left them.
func Of(pid int, run record.Run) []int {
	tree := Descendants(pid)
	for _, sp := range run.Spawned {
		if !slices.Contains(tree, sp.Pid) {
			tree = append(tree, sp.Pid)
		}
	}
	return tree
}

// Descendants lists the live descendants of pid, from /proc.
func Descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state, ppid, ...
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		if proc.Alive(queue[0]) {
			out = append(out, queue[0])
		}
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// Watch follows a record log while a test runs. The moment a run's start
// line appears, it checks in /proc that no worker spawned by an earlier run
// is alive: the old tree is gone before a new command starts, whether on
// another node or in place (a restart).
type Watch struct {
	logPath string
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	// Valid after Halt.
	bad    []string
	starts int
	maxLag time.Duration
}

// Every is how often a Watch reads the log.
const Every = 2 * time.Millisecond

// NewWatch starts a Watch on the log at logPath. Halt it.
func NewWatch(logPath string) *Watch {
	w := &Watch{logPath: logPath, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Halt stops the watch (it may be called again) and returns what it found
// wrong, how many run starts it checked, and the longest time from a start
// line's timestamp to its check.
func (w *Watch) Halt() (bad []string, starts int, maxLag time.Duration) {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	return w.bad, w.starts, w.maxLag
}

func (w *Watch) run() {
	defer close(w.done)
	var (
		off     int64
		pending []byte
		pids    []int
		names   []string // of pids, for messages
		flagged = map[int]bool{}
	)
	line := func(text string) {
		l, err := record.ParseLine(text)
		if err != nil {
			// A writer SIGKILLed mid-write leaves a fragment that the next
			// writer's line follows (see record.SplitTorn): keep that line.
			_, next, torn := record.SplitTorn(text)
			if !torn {
				w.bad = append(w.bad, fmt.Sprintf("tree watch: line %q: %v", text, err))
				return
			}
			l = next
		}
		switch l.Kind {
		case record.KindSpawned:
			pid, role, _ := strings.Cut(l.Extra, " ")
			p, err := strconv.Atoi(pid)
			if err != nil {
				w.bad = append(w.bad, fmt.Sprintf("tree watch: line %q: %v", text, err))
				return
			}
			pids = append(pids, p)
			names = append(names, fmt.Sprintf("%s worker %d of %s (token %d, pid %d)", role, p, l.Node, l.Token, l.Pid))
		case record.KindStart:
			w.starts++
			w.maxLag = max(w.maxLag, time.Since(l.At))
			for i, p := range pids {
				if !flagged[p] && WorkerAlive(p, w.logPath) {
					flagged[p] = true
					w.bad = append(w.bad, fmt.Sprintf("the %s is alive %.1f ms after the run of %s (token %d, pid %d) started",
						names[i], float64(time.Since(l.At))/float64(time.Millisecond), l.Node, l.Token, l.Pid))
				}
			}
		}
	}
	scan := func() {
		f, err := os.Open(w.logPath)
		if err != nil {
			return // not written yet
		}
		defer f.Close()
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			w.bad = append(w.bad, "tree watch: "+err.Error())
			return
		}
		b, _ := io.ReadAll(f)
		off += int64(len(b))
		pending = append(pending, b...)
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				return
			}
			line(string(pending[:i]))
			pending = pending[i+1:]
		}
	}
	tick := time.NewTicker(Every)
	defer tick.Stop()
	for {
		scan()
		select {
		case <-w.stop:
			scan()
			return
		case <-tick.C:
		}
	}
}

// ReadLog reads the whole record log at path, runs and workers, and fails
// t if it cannot.
func ReadLog(t testing.TB, path string) record.Log {
	t.Helper()
	lg, err := record.ReadAll(path)
	if err != nil {
		t.Fatalf("record log: %v", err)
	}
	return lg
}
