package lock

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/record"
)

const (
	ttl = 2 * time.Second
	// kubeTTL is the --ttl on the Kubernetes API: its Lease renewals go
	// through the test's kube-apiserver and its etcd, which on the loaded
	// CI machine answered none for 1.2 s (runs J, K and L), and a 2 s
	// term leaves about 1 s for that. A term then ended as designed, and
	// the scenario, which needs it to hold, failed.
	kubeTTL     = 4 * time.Second
	stopTimeout = 500 * time.Millisecond

	runTimeout  = 15 * time.Second // a command starts, from any state
	exitTimeout = 20 * time.Second // an electd exits, from any state
	goneTimeout = 2 * time.Second  // a killed electd's child disappears
)

// harness is one scenario: a lock of its own (Name), a record log shared
// by all its commands, and the processes it started.
type harness struct {
	*kit.Scenario
	s *kit.Store
}

// newHarness prepares a scenario on s. At cleanup it kills every process it
// started, checks that their commands died with them, and on failure
// prints their output and the record log.
func newHarness(t *testing.T, s *kit.Store) *harness {
	return &harness{Scenario: kit.NewScenario(t, s, "lock-", bin.Recorder, goneTimeout), s: s}
}

// opts are the differences between `electd lock` processes.
type opts struct {
	link    *kit.Link // how it reaches the store; nil: directly (Direct)
	args    []string  // flags before NAME
	env     []string  // RECORD_* knobs and the like
	command []string  // empty: the recorder
}

// lock starts `electd lock [flags] NAME -- COMMAND` as node id.
func (h *harness) lock(id string, o opts) *proc {
	h.T.Helper()
	dial, sys := h.s.Direct(), (*syscall.SysProcAttr)(nil)
	if o.link != nil {
		dial, sys = o.link.Dial, o.link.SysProcAttr
	}
	args := append(append([]string{"lock"}, dial.Flags()...), "--id", id, "--ttl", h.ttl().String(),
		"--stop-timeout", stopTimeout.String(), "--log-format", "json", "--log-level", "debug")
	args = append(append(args, o.args...), h.Name, "--")
	if len(o.command) == 0 {
		o.command = []string{bin.Recorder}
	}
	return h.startWith(id, append(args, o.command...), slices.Concat(o.env, dial.Env), sys)
}

// ttl is the --ttl of the scenario's electd processes.
func (h *harness) ttl() time.Duration {
	if strings.HasPrefix(h.s.Name, "k8s") {
		return kubeTTL
	}
	return ttl
}

// refused runs `electd lock` with args as "other" while the holder, the
// only candidate, holds the lock, and fails t unless it exits with code,
// says every part of says, and leaves the holder alone in the store.
func (h *harness) refused(t *testing.T, args []string, code int, says ...string) {
	t.Helper()
	p := h.lock("other", opts{args: args})
	p.mustExit(code)
	p.said(says...)
	if n := h.s.Queued(t, h.Name); n != 1 {
		t.Fatalf("after exit %d the store holds %d candidates, want 1", code, n)
	}
}

// start runs electd with args, the record log in $RECORD_LOG and env. It
// is killed at cleanup.
func (h *harness) start(id string, args, env []string) *proc {
	h.T.Helper()
	return h.startWith(id, args, env, nil)
}

// startWith is start with the process attributes sys (nil: none).
func (h *harness) startWith(id string, args, env []string, sys *syscall.SysProcAttr) *proc {
	h.T.Helper()
	spec := h.Spec(id, args, env)
	if sys != nil {
		attr := *sys // the start adds to it
		spec.SysProcAttr = &attr
	}
	e, err := bin.Start(h.T, spec)
	if err != nil {
		h.T.Fatalf("start %s: %v", id, err)
	}
	return &proc{Electd: e, t: h.T}
}

// proc is one electd process.
type proc struct {
	*kit.Electd
	t *testing.T
}

// mustExit waits for electd's exit and fails the test unless its code is want.
func (p *proc) mustExit(want int) {
	p.t.Helper()
	if code := p.WaitExit(exitTimeout); code != want {
		p.t.Fatalf("%s exited with %d, want %d\n%s", p.ID, code, want, p.Tail())
	}
}

// allLines are all of the process's output lines.
func (p *proc) allLines() []string {
	out := strings.TrimRight(p.Output(), "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// lines are electd's output lines that are not JSON logs: its own
// one-line messages (errors, "already run") and its command's output.
func (p *proc) lines() []string {
	var out []string
	for l := range strings.SplitSeq(strings.TrimRight(p.Output(), "\n"), "\n") {
		if !strings.HasPrefix(l, "{") {
			out = append(out, l)
		}
	}
	return out
}

// said fails the test unless one of electd's own lines contains every part.
func (p *proc) said(parts ...string) {
	p.t.Helper()
	for _, l := range p.lines() {
		if !strings.HasPrefix(l, "electd: ") {
			continue
		}
		if !slices.ContainsFunc(parts, func(s string) bool { return !strings.Contains(l, s) }) {
			return
		}
	}
	p.t.Fatalf("%s did not say %q:\n%s", p.ID, parts, strings.Join(p.lines(), "\n"))
}

// waitRun waits for a run of node's command and returns it.
func (h *harness) waitRun(node string) record.Run {
	h.T.Helper()
	return h.waitRunWithin(node, runTimeout)
}

func (h *harness) waitRunWithin(node string, within time.Duration) record.Run {
	h.T.Helper()
	return h.WaitRun(within, node+"'s command running", func(r record.Run) bool { return r.Node == node })
}

// waitQueued waits until the store holds n candidates for the lock.
func (h *harness) waitQueued(n int) {
	h.T.Helper()
	h.Poll(runTimeout, fmt.Sprintf("%d candidates in the store", n), func() (bool, string) {
		got := h.s.Queued(h.T, h.Name)
		return got == n, fmt.Sprintf("%d candidates", got)
	})
}

// maxConcurrent is the largest number of runs alive at one instant.
func maxConcurrent(runs []record.Run) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, r := range runs {
		edges = append(edges, edge{r.Start, +1}, edge{r.End(), -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	cur, most := 0, 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}
