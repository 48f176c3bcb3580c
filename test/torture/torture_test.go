package torture

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/record"
)

const (
	agreeBound  = 30 * time.Second       // after a leader runs, every copy agrees on it
	settlePoll  = 25 * time.Millisecond  // HTTP and log polling while settling
	historyTail = 12                     // faults shown with a failure
	storyLines  = 10                     // events of each node's log shown first with a failure
	settleHold  = 800 * time.Millisecond // a leader must hold this long before the next fault
)

// TestTorture attacks a cluster of real electd processes on each backend
// with randomly interleaved faults and proves, from the children's own
// record, that no two terms overlapped, that fencing tokens only grew, that
// no child outlived its electd and that a leader always came back. The
// backends run in parallel, each on its own store server.
func TestTorture(t *testing.T) {
	cfg := newConfig(t)
	t.Logf("torture: seed %d (replay with -torture.seed=%d or TORTURE_SEED=%d), %d faults per backend (%d per topology), %d nodes, ttl %s",
		cfg.seed, cfg.seed, cfg.seed, cfg.faults, cfg.topoFaults, cfg.nodes, cfg.ttl)
	if cfg.kinds != nil {
		t.Logf("torture: drawing only %v (-torture.kinds), where they apply", cfg.kinds)
	}
	kit.Run(t, selected(t), func(t *testing.T, s *kit.Store) {
		newCluster(t, cfg, s).torture()
	})
}

// torture runs the whole schedule on c, then the final checks.
func (c *cluster) torture() {
	t := c.t
	rng := c.cfg.rng(c.s.Name)
	sched := newScheduler(rng, c.cfg.nodes, c.cfg.kindsOn(t, c.s))
	var history []*fault
	c.history = &history
	begin := time.Now()
	lead, run, _ := c.settle(begin, nil)
	for i := 1; i <= c.cfg.faultsOn(c.s); i++ {
		st := state{up: len(c.up()), down: len(c.down()), treeDies: c.treeDies(),
			workers: len(c.j.workersOf(run)) > 0 && c.node(run.Node).workers}
		f := &fault{seq: i, kind: sched.next(st), old: run}
		history = append(history, f)
		c.inject(f, rng, lead)
		lead, run, f.recovery = c.settle(f.healed, f)
		c.measure(f)
		t.Log(f.describe())
		errs := c.verify()
		if err := f.stoppedLate(c.j); err != nil {
			errs = append(errs, err)
		}
		if err := f.earlySuccessor(); err != nil {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			c.fatalf(f, "safety check failed:\n%s", joinErrs(errs))
		}
	}
	if err := c.j.sync(); err != nil {
		t.Fatalf("record log: %v", err)
	}
	if errs := c.verify(); len(errs) > 0 {
		c.fatalf(nil, "safety check failed:\n%s", joinErrs(errs))
	}
	took := time.Since(begin)
	c.killAll() // after the run: no worker outlives its kill -9'd electd (pidns)
	if c.orphans != 0 {
		c.fatalf(nil, "%d orphans: workers alive after their term ended", c.orphans)
	}
	tab := newTable(c, history)
	t.Logf("torture %s: seed %d, %d faults in %s, %d children, %d record lines (%d writes accepted by the fence, %d rejected); "+
		"0 overlaps, 0 token regressions, %d orphans\n%s",
		c.s.Name, c.cfg.seed, len(history), took.Round(time.Second), len(c.j.runs), c.j.lines,
		c.j.fence.accepted, c.j.fence.rejected, c.orphans, tab.text())
	if *flagReport != "" {
		c.report(tab, len(history), took)
	}
}

// settle waits until one up node leads with its child running, every up
// node's /leader agrees, and that has held for settleHold. It fails the
// test if no child runs within ttl plus the recovery bound after healed,
// or the copies do not agree within agreeBound after that. It returns the
// leader, its child's run and the recovery time after healed.
func (c *cluster) settle(healed time.Time, f *fault) (*node, *record.Run, time.Duration) {
	leadBy, bound := c.recoveryDeadline(healed, f)
	var (
		agreeBy   = leadBy.Add(agreeBound)
		last      *record.Run
		since     time.Time
		status    string
		recovered = false
		recovery  time.Duration
	)
	for {
		if err := c.j.sync(); err != nil {
			c.fatalf(f, "record log: %v", err)
		}
		for _, n := range c.up() {
			if n.cur.Exited() {
				c.fatalf(f, "electd %s exited on its own with %d:\n%s", n.id, n.cur.ExitCode(), n.cur.Tail())
			}
		}
		if !recovered {
			var old *record.Run
			if f != nil {
				old = f.old
			}
			if r, ok := c.recoveredAfter(healed, old); ok {
				recovered, recovery = true, r
				if healed.Add(recovery).After(leadBy) {
					c.fatalf(f, "no child ran for %s after the fault healed, later than %s", recovery, bound)
				}
			}
		}
		run, ok := c.agreed(&status)
		now := time.Now()
		if ok && run == last {
			if now.Sub(since) >= settleHold {
				if !recovered && run == oldRun(f) {
					recovered = true // the fault's child survived it
				}
				if recovered {
					return c.node(run.Node), run, recovery
				}
			}
		} else if ok {
			last, since = run, now
		} else {
			last = nil
		}
		if !recovered && now.After(leadBy) {
			c.fatalf(f, "no child running %s after the fault healed (%s); last: %s", now.Sub(healed), bound, status)
		}
		if now.After(agreeBy) {
			c.fatalf(f, "the copies did not agree on a leader within %s; last: %s", now.Sub(healed), status)
		}
		time.Sleep(settlePoll)
	}
}

// recoveryDeadline is when a child must run again after f (nil: the
// start) healed, and the rule that says so:
//
//   - after every fault, ttl plus the recovery bound after the heal;
//   - after a topology fault that moved the election's keys to another
//     master (master-kill, master-sigstop, planned-failover, slot-failover,
//     slot-manual-failover, reshard, and a misconf the sentinels failed
//     over), no earlier than 2·ttl plus the recovery bound after that
//     master took writes: the failover's own time (measured per fault:
//     about 3.3 s after a kill -9 under Sentinel with down-after 2000 ms,
//     2.1–2.8 s under Cluster) and one TTL for the new epoch (the new
//     master reports another run_id, so the Redis backend grants no term
//     for one TTL after its first script there), then the ordinary bound.
func (c *cluster) recoveryDeadline(healed time.Time, f *fault) (time.Time, string) {
	base := c.cfg.ttl + c.cfg.recoveryBound
	by, why := healed.Add(base), fmt.Sprintf("ttl + %s after the heal", c.cfg.recoveryBound)
	if f != nil && !f.storeUp.IsZero() {
		if b := f.storeUp.Add(c.cfg.ttl + base); b.After(by) {
			by, why = b, fmt.Sprintf("the store's failover (%s) + one ttl for the new epoch + ttl + %s after the fault",
				f.storeUp.Sub(f.at).Round(time.Millisecond), c.cfg.recoveryBound)
		}
	}
	return by, why
}

// recoveredAfter reports whether a child other than old (the one the fault
// hit) ran at healed or started after it, and how long after healed that
// was. A paused child counts only until it was resumed.
func (c *cluster) recoveredAfter(healed time.Time, old *record.Run) (time.Duration, bool) {
	var first time.Time
	adj := c.j.adjusted().Runs
	for i, r := range c.j.runs {
		if r == old {
			continue
		}
		a := adj[i]
		running := !a.Ended() && c.isChild(r) && c.j.pauses[r] == nil
		if a.Start.Before(healed) && (!a.End().Before(healed) || running) {
			return 0, true
		}
		if a.Start.After(healed) && (first.IsZero() || a.Start.Before(first)) {
			first = a.Start
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return first.Sub(healed), true
}

// agreed finds the running child of the highest token and reports whether
// its node leads by its own /leader and every up node names it with that
// token.
func (c *cluster) agreed(status *string) (*record.Run, bool) {
	var run *record.Run
	for _, r := range c.j.runs {
		if !r.Ended() && c.isChild(r) && (run == nil || r.Token > run.Token) {
			run = r
		}
	}
	if run == nil {
		*status = "no child running"
		return nil, false
	}
	n := c.node(run.Node)
	if n == nil || n.cur == nil {
		*status = fmt.Sprintf("child %s runs but its node is down", run)
		return run, false
	}
	for _, m := range c.up() {
		d, err := m.cur.leader()
		switch {
		case err != nil:
			*status = fmt.Sprintf("%s: /leader: %v", m.id, err)
			return run, false
		case d.Leader == nil || d.Leader.ID != run.Node || d.Leader.FencingToken != run.Token:
			*status = fmt.Sprintf("%s: /leader says %+v; the running child is %s", m.id, d.Leader, run)
			return run, false
		case m == n && !d.Self.Leader:
			*status = fmt.Sprintf("%s runs child %s but does not say it leads", m.id, run)
			return run, false
		}
	}
	*status = "agreed on " + run.String()
	return run, true
}

// fatalf fails the test with the seed, the recent faults, the runs and the
// electd logs.
func (c *cluster) fatalf(f *fault, format string, args ...any) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "torture %s, seed %d", c.s.Name, c.cfg.seed)
	if f != nil {
		fmt.Fprintf(&b, ", fault #%d %s on %s (%s)", f.seq, f.kind, f.target, f.note)
	}
	fmt.Fprintf(&b, ": %s\n", fmt.Sprintf(format, args...))
	// The short story of every node first: a CI report may keep only the
	// start and the end of a long message.
	for _, n := range c.nodes {
		b.WriteString(kit.Story(n.id, filepath.Join(c.dir, n.id+".log"), storyLines) + "\n")
	}
	if c.history != nil {
		h := *c.history
		fmt.Fprintf(&b, "recent faults:\n")
		for _, g := range h[max(0, len(h)-historyTail):] {
			fmt.Fprintf(&b, "  %s\n", g.describe())
		}
	}
	runs := c.j.runs
	fmt.Fprintf(&b, "last children (of %d) in %s:\n", len(runs), c.logPath)
	for _, r := range runs[max(0, len(runs)-2*historyTail):] {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	for _, n := range c.nodes {
		if n.cur != nil {
			b.WriteString(n.cur.Tail() + "\n")
		}
	}
	c.t.Fatal(b.String())
}

func oldRun(f *fault) *record.Run {
	if f == nil {
		return nil
	}
	return f.old
}

func joinErrs(errs []error) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  - %v\n", e)
	}
	return b.String()
}

// report appends the figures of this backend, as Markdown, to the report file.
func (c *cluster) report(tab *table, faults int, took time.Duration) {
	f, err := os.OpenFile(*flagReport, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "\n### %s: seed %d, %d faults, %d nodes, ttl %s, %s containment, %s\n\n%s", c.s.Name, c.cfg.seed, faults,
		c.cfg.nodes, c.cfg.ttl, c.containment, took.Round(time.Second), tab.markdown())
}
