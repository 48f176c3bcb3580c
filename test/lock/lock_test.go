package lock

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/test/kit"
	pidwatch "github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// testMutualExclusion: ten concurrent holders each read a shared counter,
// run a while and write counter+1: no update is lost, and no two commands
// overlap.
func testMutualExclusion(t *testing.T, s *kit.Store) {
	const n = 10
	h := newHarness(t, s)
	counter := filepath.Join(h.Dir, "counter")
	if err := os.WriteFile(counter, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(h.Dir, "increment.sh")
	body := "#!/bin/sh\nset -e\nn=$(cat \"$COUNTER\")\n\"$RECORDER\"\necho $((n + 1)) > \"$COUNTER\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"COUNTER=" + counter, "RECORDER=" + bin.Recorder, "RECORD_EXIT_AFTER=30ms"}
	procs := make([]*proc, n)
	for i := range n {
		procs[i] = h.lock(fmt.Sprintf("p%02d", i), opts{env: env, command: []string{script}})
	}
	for _, p := range procs {
		p.mustExit(0)
	}
	b, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(n) {
		t.Fatalf("counter is %s after %d increments under the lock", got, n)
	}
	runs := h.Check(record.Options{})
	nodes := map[string]bool{}
	for _, r := range runs {
		nodes[r.Node] = true
	}
	if len(runs) != n || len(nodes) != n {
		t.Fatalf("%d runs on %d nodes, want %d on %d:\n%s", len(runs), len(nodes), n, n, kit.Describe(runs))
	}
	h.waitQueued(0)
}

// testHandover measures, among six queued holders, the time from one
// command's end to the next one's start.
func testHandover(t *testing.T, s *kit.Store) {
	const n = 6
	h := newHarness(t, s)
	var procs []*proc
	for i := range n {
		procs = append(procs, h.lock(fmt.Sprintf("h%d", i), opts{env: []string{"RECORD_EXIT_AFTER=50ms"}}))
	}
	for _, p := range procs {
		p.mustExit(0)
	}
	runs := h.Check(record.Options{})
	if len(runs) != n {
		t.Fatalf("%d runs, want %d", len(runs), n)
	}
	var gaps []time.Duration
	for i := 1; i < len(runs); i++ {
		gaps = append(gaps, runs[i].Start.Sub(runs[i-1].End()))
	}
	slices.Sort(gaps)
	t.Logf("%s: command end to next command start over %d handovers: min %s, median %s, max %s",
		s.Name, len(gaps), kit.Millis(gaps[0]), kit.Millis(gaps[len(gaps)/2]), kit.Millis(gaps[len(gaps)-1]))
}

// testBusy: while the lock is held, --wait 0 and --wait D exit 75 naming
// the holder and leave nothing in the store.
func testBusy(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	holder := h.lock("holder", opts{})
	run := h.waitRun("holder")
	tests := []struct {
		name string
		wait string
	}{
		{"try once", "0"},
		{"wait a while", "300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			h.refused(t, []string{"--wait", tt.wait}, 75,
				"lock "+h.Name, "not acquired", "held by holder (token "+strconv.FormatUint(run.Token, 10)+")")
			t.Logf("--wait %s: exit 75 after %s", tt.wait, kit.Millis(time.Since(start)))
		})
	}
	for _, r := range h.Runs() {
		if r.Node != "holder" {
			t.Fatalf("a command ran while the lock was held: %s", r)
		}
	}
	holder.Signal(syscall.SIGTERM)
	holder.mustExit(128 + int(syscall.SIGTERM))
	holder.said("stopped by SIGTERM", "lock released")
	if r := h.RunOf(run.Pid); r.Stop.IsZero() {
		t.Fatalf("the holder's command was not stopped with SIGTERM: %s", r)
	}
	h.waitQueued(0)
	after := h.lock("after", opts{args: []string{"--wait", "0"}, env: []string{"RECORD_EXIT_AFTER=10ms"}})
	after.mustExit(0)
	h.Check(record.Options{})
}

// testSignals: SIGTERM to a waiter and SIGINT to a holder exit 128+signal
// and leave nothing held in the store.
func testSignals(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	holder := h.lock("holder", opts{})
	run := h.waitRun("holder")
	waiter := h.lock("waiter", opts{})
	h.waitQueued(2)
	waiter.Signal(syscall.SIGTERM)
	waiter.mustExit(128 + int(syscall.SIGTERM))
	waiter.said("stopped by SIGTERM", "nothing held")
	if n := h.s.Queued(t, h.Name); n != 1 {
		t.Fatalf("after the waiter's exit the store holds %d candidates, want 1", n)
	}
	holder.Signal(syscall.SIGINT)
	holder.mustExit(128 + int(syscall.SIGINT))
	if r := h.RunOf(run.Pid); r.Stop.IsZero() {
		t.Fatalf("the holder's command was not stopped: %s", r)
	}
	if n := h.s.Queued(t, h.Name); n != 0 {
		t.Fatalf("after the holder's exit the store holds %d candidates, want 0", n)
	}
	if runs := h.Check(record.Options{}); len(runs) != 1 {
		t.Fatalf("%d runs, want only the holder's:\n%s", len(runs), kit.Describe(runs))
	}
}

// testExitCodes: the command's exit code passes through, 128+N for a
// command killed by signal N.
func testExitCodes(t *testing.T, s *kit.Store) {
	for _, tt := range kit.ChildExits {
		t.Run(tt.Name, func(t *testing.T) {
			h := newHarness(t, s)
			p := h.lock("x", opts{env: []string{"RECORD_EXIT_AFTER=20ms", "RECORD_EXIT_CODE=" + tt.Code}})
			p.mustExit(tt.Want)
			runs := h.Check(record.Options{})
			if len(runs) != 1 || runs[0].Exit.IsZero() {
				t.Fatalf("runs:\n%s", kit.Describe(runs))
			}
			h.waitQueued(0)
		})
	}
}

// testLostLock: a holder cut off from the store stops its command by its
// own deadline, before the next holder's command starts, and exits 76.
func testLostLock(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	px := s.Link(t)
	a := h.lock("a", opts{link: px})
	old := h.waitRun("a")
	b := h.lock("b", opts{})
	h.waitQueued(2)

	cut := time.Now()
	px.Cut()
	next := h.waitRun("b")
	a.mustExit(76)
	a.said("lock "+h.Name+" lost while the command ran", "stopped")
	kit.CheckCutOff(t, cut, h.ttl(), h.RunOf(old.Pid), next)
	px.Heal()
	b.Signal(syscall.SIGTERM)
	b.mustExit(128 + int(syscall.SIGTERM))
	h.Check(record.Options{})
	h.waitQueued(0)
}

// testSlots: six contenders for three slots. Three commands run at once
// while the other three wait; each release lets exactly one more in; never
// more than three commands run at once, each holder with its own token.
func testSlots(t *testing.T, s *kit.Store) {
	const contenders, slots = 6, 3
	h := newHarness(t, s)
	if s.SlotsRefused != "" {
		h.slotsRefused(t, slots)
		return
	}
	procs := map[string]*proc{}
	for i := range contenders {
		id := fmt.Sprintf("s%d", i)
		procs[id] = h.lock(id, opts{args: []string{"--slots", strconv.Itoa(slots)}})
	}
	running := func() []record.Run {
		var out []record.Run
		for _, r := range h.Runs() {
			if !r.Ended() && pidwatch.Alive(r.Pid) {
				out = append(out, r)
			}
		}
		return out
	}
	h.Poll(runTimeout, "three commands running, six candidates queued", func() (bool, string) {
		n, q := len(running()), h.s.Queued(t, h.Name)
		return n == slots && q == contenders, fmt.Sprintf("%d running, %d queued", n, q)
	})
	// Release the holders one at a time, oldest first: each release lets
	// the next contender in, until all six have run.
	for started := slots; started <= contenders; started++ {
		if n := len(h.Runs()); n != started {
			t.Fatalf("%d commands started, want %d:\n%s", n, started, kit.Describe(h.Runs()))
		}
		run := running()[0]
		p := procs[run.Node]
		p.Signal(syscall.SIGTERM)
		p.mustExit(128 + int(syscall.SIGTERM))
		want := min(started+1, contenders)
		h.Poll(runTimeout, fmt.Sprintf("%d commands started", want), func() (bool, string) {
			n := len(h.Runs())
			return n == want, fmt.Sprintf("%d started", n)
		})
	}
	for _, p := range procs {
		if !p.Exited() {
			p.Signal(syscall.SIGTERM)
			p.mustExit(128 + int(syscall.SIGTERM))
		}
	}
	runs := h.Runs()
	if len(runs) != contenders {
		t.Fatalf("%d runs, want %d:\n%s", len(runs), contenders, kit.Describe(runs))
	}
	tokens := map[uint64]bool{}
	for _, r := range runs {
		if tokens[r.Token] {
			t.Fatalf("token %d given twice:\n%s", r.Token, kit.Describe(runs))
		}
		tokens[r.Token] = true
		if r.Stop.IsZero() {
			t.Fatalf("a command was not stopped with SIGTERM: %s", r)
		}
	}
	if most := maxConcurrent(runs); most != slots {
		t.Fatalf("at most %d commands ran at once with --slots %d, want exactly %d:\n%s", most, slots, slots, kit.Describe(runs))
	}
	h.waitQueued(0)
}

// testSlotsMismatch: a candidate whose --slots differs from the holder's is
// refused with both numbers (exit 2), and changes nothing.
func testSlotsMismatch(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	if s.SlotsRefused != "" {
		h.slotsRefused(t, 2) // the holder itself is refused: no mismatch to meet
		return
	}
	holder := h.lock("holder", opts{args: []string{"--slots", "2"}})
	h.waitRun("holder")
	tests := []struct {
		name  string
		slots string
	}{
		{"more", "3"},
		{"plain lock", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.refused(t, []string{"--slots", tt.slots, "--wait", "5s"}, 2, "has "+tt.slots+" slot(s)", "have 2", "--slots")
		})
	}
	holder.Signal(syscall.SIGTERM)
	holder.mustExit(128 + int(syscall.SIGTERM))
	if runs := h.Runs(); len(runs) != 1 {
		t.Fatalf("%d runs, want only the holder's:\n%s", len(runs), kit.Describe(runs))
	}
}

// testOncePer: five hosts start the same job at once with --once-per; it
// runs exactly once, and the others say who ran it.
func testOncePer(t *testing.T, s *kit.Store) {
	const hosts = 5
	h := newHarness(t, s)
	var procs []*proc
	for i := range hosts {
		procs = append(procs, h.lock(fmt.Sprintf("host%d", i), opts{args: []string{"--once-per", "1m"},
			env: []string{"RECORD_EXIT_AFTER=300ms"}}))
	}
	for _, p := range procs {
		p.mustExit(0)
	}
	runs := h.Runs()
	if len(runs) != 1 {
		t.Fatalf("%d runs, want exactly 1:\n%s", len(runs), kit.Describe(runs))
	}
	for _, p := range procs {
		if p.ID != runs[0].Node {
			p.said("already run by "+runs[0].Node, "token "+strconv.FormatUint(runs[0].Token, 10))
		}
	}
	h.waitQueued(0)
}

// testOncePerRetry: a failed run records nothing, so the next host in line
// runs the job; once it succeeded, a later host skips it.
func testOncePerRetry(t *testing.T, s *kit.Store) {
	h := newHarness(t, s)
	once := []string{"--once-per", "1m"}
	a := h.lock("a", opts{args: once, env: []string{"RECORD_EXIT_AFTER=300ms", "RECORD_EXIT_CODE=3"}})
	h.waitRun("a")
	b := h.lock("b", opts{args: once, env: []string{"RECORD_EXIT_AFTER=50ms"}})
	a.mustExit(3)
	b.mustExit(0)
	runs := h.Check(record.Options{})
	if len(runs) != 2 || runs[0].Node != "a" || runs[1].Node != "b" {
		t.Fatalf("runs, want a's then b's:\n%s", kit.Describe(runs))
	}
	c := h.lock("c", opts{args: once, env: []string{"RECORD_EXIT_AFTER=50ms"}})
	c.mustExit(0)
	c.said("already run by b")
	if runs := h.Runs(); len(runs) != 2 {
		t.Fatalf("the job ran again within --once-per:\n%s", kit.Describe(runs))
	}
	h.waitQueued(0)
}

// testLeaderWatch: `electd leader --watch` streams every change of the
// lock's holder, as text or JSON lines, until SIGINT, then exits 0.
func testLeaderWatch(t *testing.T, s *kit.Store) {
	tests := []struct {
		name   string
		format string
		held   func(line string) bool
		free   func(line string) bool
	}{
		{"text", "text",
			func(l string) bool { return strings.Contains(l, ": holder token=") },
			func(l string) bool { return strings.HasSuffix(l, ": no leader") }},
		{"json", "json", jsonLeader("holder"), jsonLeader("")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, s)
			dial := s.Direct()
			w := h.start("watch", append(append([]string{"leader"}, dial.Flags()...), "--election", h.Name,
				"--watch", "-o", tt.format, "--log-level", "warn"), dial.Env)
			seen := func(match func(string) bool, after int) func() (bool, string) {
				return func() (bool, string) {
					lines := w.allLines()
					for _, l := range lines[min(after, len(lines)):] {
						if match(l) {
							return true, ""
						}
					}
					return false, strings.Join(lines, "\n")
				}
			}
			h.Poll(runTimeout, "no holder at first", seen(tt.free, 0))
			holder := h.lock("holder", opts{args: []string{"--log-level", "warn"}})
			h.Poll(runTimeout, "the holder", seen(tt.held, 0))
			n := len(w.allLines())
			holder.Signal(syscall.SIGTERM)
			holder.mustExit(128 + int(syscall.SIGTERM))
			h.Poll(runTimeout, "no holder after its release", seen(tt.free, n))
			w.Signal(syscall.SIGINT)
			w.mustExit(0)
		})
	}
}

// jsonLeader matches a JSON line of `electd leader -o json` naming id as
// leader, or no leader when id is empty.
func jsonLeader(id string) func(string) bool {
	return func(l string) bool {
		var d kit.LeaderDoc
		if json.Unmarshal([]byte(l), &d) != nil || d.Election == "" {
			return false
		}
		if id == "" {
			return d.Leader == nil
		}
		return d.Leader != nil && d.Leader.ID == id && d.Leader.FencingToken != 0
	}
}

// slotsRefused, for a backend that refuses semaphores (kit.Store's
// SlotsRefused: a Redlock quorum), checks that `electd lock --slots n`
// exits 2 at once, naming --slots, runs nothing and leaves nothing in the
// store; and that the same lock with --slots 1 is taken as usual.
func (h *harness) slotsRefused(t *testing.T, n int) {
	t.Helper()
	t.Logf("%s: %s", h.s.Name, h.s.SlotsRefused)
	p := h.lock("s", opts{args: []string{"--slots", strconv.Itoa(n)}})
	p.mustExit(2)
	p.said("--slots", strconv.Itoa(n)+" slots")
	if runs := h.Runs(); len(runs) != 0 {
		t.Fatalf("the command ran with --slots %d:\n%s", n, kit.Describe(runs))
	}
	if q := h.s.Queued(t, h.Name); q != 0 {
		t.Fatalf("after the refusal the store holds %d candidates, want 0", q)
	}
	one := h.lock("one", opts{args: []string{"--slots", "1"}, env: []string{"RECORD_EXIT_AFTER=20ms"}})
	one.mustExit(0)
	if runs := h.Check(record.Options{}); len(runs) != 1 || runs[0].Node != "one" {
		t.Fatalf("runs with --slots 1, want one's:\n%s", kit.Describe(runs))
	}
	h.waitQueued(0)
}
