package torture

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// table is the summary of a run: per fault kind, how often it was injected
// and how often a new term followed, and the distribution of each figure.
type table struct {
	rows   []row
	counts map[kind][2]int // injected, followed by a new term
	stale  [3]int          // stale writes after resume, after a newer term's, rejected
	pauses int
	wrote  int // pauses after which the child wrote again
	// The process trees: containment mode, children that started
	// workers, workers, worker lines, orphans (alive after their term).
	containment                        string
	treeRuns, workers, wlines, orphans int
	torn                               []string // torn lines: where each broke off
	// direct: the store could not be proxied, so the proxy faults were
	// not drawn; why: how its client reaches it instead (kit.Reach).
	direct bool
	why    string
	// about: how the nodes reach a store with faults of its own, when its
	// entry of ownKinds says (a Redlock quorum's servers).
	about string
	// refusals: misconf and oom, per kind: injected, term kept; and of
	// those refusing for less than keepBound, injected and term kept.
	refusals  map[kind][4]int
	keepBound time.Duration
	// termGaps: the etcd cluster's own faults followed by a new term whose
	// term gap was measured, and of those, the early successors
	// (figTermGap < 0).
	termGaps, termOverlaps int
}

type row struct {
	kind                     kind
	figure                   string
	n                        int
	min, median, p99, maxVal time.Duration
}

func newTable(c *cluster, faults []*fault) *table {
	tab := &table{counts: map[kind][2]int{}, containment: c.containment, orphans: c.orphans, workers: len(c.j.workers), direct: c.direct,
		why: c.s.Reach().Why, refusals: map[kind][4]int{}, keepBound: c.keepBound()}
	if own := ownOf(c.s); own != nil && own.about != nil {
		tab.about = own.about(c)
	}
	for _, w := range c.j.workers {
		tab.wlines += w.Lines
	}
	for _, tl := range c.j.torn {
		tab.torn = append(tab.torn, fmt.Sprintf("%q at offset %d (4096·%d + %d)", tl.fragment, tl.end, tl.end/4096, tl.end%4096))
	}
	for _, r := range c.j.runs {
		if len(r.Spawned) > 0 {
			tab.treeRuns++
		}
	}
	samples := map[kind]map[string][]time.Duration{}
	order := map[kind][]string{}
	for _, f := range faults {
		n := tab.counts[f.kind]
		n[0]++
		if f.next != nil {
			n[1]++
		}
		tab.counts[f.kind] = n
		if f.kind == misconf || f.kind == oom {
			r, kept := tab.refusals[f.kind], 0
			if f.next == nil {
				kept = 1
			}
			r[0], r[1] = r[0]+1, r[1]+kept
			if f.healed.Sub(f.at) < tab.keepBound {
				r[2], r[3] = r[2]+1, r[3]+kept
			}
			tab.refusals[f.kind] = r
		}
		if samples[f.kind] == nil {
			samples[f.kind] = map[string][]time.Duration{}
		}
		for _, g := range f.figs {
			if g.name == figTermGap {
				tab.termGaps++
				if g.d < 0 {
					tab.termOverlaps++
				}
			}
			if _, seen := samples[f.kind][g.name]; !seen {
				order[f.kind] = append(order[f.kind], g.name)
			}
			samples[f.kind][g.name] = append(samples[f.kind][g.name], g.d)
		}
	}
	for _, p := range c.j.pauses {
		tab.pauses++
		if p.staleLines > 0 {
			tab.wrote++
		}
		tab.stale[0] += p.staleLines
		tab.stale[1] += p.afterNewer
		tab.stale[2] += p.rejected
	}
	for _, k := range allKinds {
		for _, name := range order[k] {
			s := samples[k][name]
			slices.Sort(s)
			tab.rows = append(tab.rows, row{kind: k, figure: name, n: len(s),
				min: s[0], median: quantile(s, 0.5), p99: quantile(s, 0.99), maxVal: s[len(s)-1]})
		}
	}
	return tab
}

// quantile is the nearest-rank q-quantile of sorted s.
func quantile(s []time.Duration, q float64) time.Duration {
	i := int(float64(len(s))*q+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func (tab *table) lines() [][]string {
	out := [][]string{{"fault", "injected", "new term", "figure (ms)", "n", "min", "median", "p99", "max"}}
	var last kind
	for _, r := range tab.rows {
		k, inj, moved := "", "", ""
		if r.kind != last {
			n := tab.counts[r.kind]
			k, inj, moved = string(r.kind), fmt.Sprint(n[0]), fmt.Sprint(n[1])
			last = r.kind
		}
		out = append(out, []string{k, inj, moved, r.figure, fmt.Sprint(r.n),
			msec(r.min), msec(r.median), msec(r.p99), msec(r.maxVal)})
	}
	return out
}

func (tab *table) footer() string {
	return fmt.Sprintf("containment %s; %d children started %d workers (group, setsid, daemon), which wrote %d lines; orphans (workers alive after their term ended): %d\n"+
		"SIGSTOP pauses: %d, after %d of which the resumed child (or a worker) wrote again before its electd stopped it; "+
		"writes of resumed children and their workers: %d, of which %d came after a newer term had written and %d of those were rejected by the fence",
		tab.containment, tab.treeRuns, tab.workers, tab.wlines, tab.orphans,
		tab.pauses, tab.wrote, tab.stale[0], tab.stale[1], tab.stale[2]) + tab.tornNote() + tab.topologyNote() + tab.termNote()
}

// termNote counts, on the etcd cluster, the new terms elected before the
// deadline the old term had earned (from the electd logs: figTermGap < 0),
// which the record shows only when the children overlapped too.
func (tab *table) termNote() string {
	if tab.termGaps == 0 {
		return ""
	}
	return fmt.Sprintf("\nearly successors (the next term elected before the deadline the old term's last acknowledged renewal had earned, "+
		"from the electd logs; the record shows it only if the children overlapped too), after the etcd cluster's own faults: %d of %d new terms measured",
		tab.termOverlaps, tab.termGaps)
}

// topologyNote says which kinds a topology left out, and how often the
// term survived a store that refused writes for less than the lease.
func (tab *table) topologyNote() string {
	if tab.about != "" {
		return "\n" + tab.about
	}
	if !tab.direct {
		return ""
	}
	var names []string
	for _, k := range proxyKinds {
		names = append(names, string(k))
	}
	s := fmt.Sprintf("\nnot drawn: %s (every node reaches the topology directly: %s; cuts are an nftables rule on the node's sockets, which can neither delay nor reset)",
		strings.Join(names, ", "), tab.why)
	for _, k := range []kind{misconf, oom} {
		if r := tab.refusals[k]; r[0] > 0 {
			s += fmt.Sprintf("\nterm kept through %s (writes refused for 0.3–0.8 ttl): %d of %d; through the %d refusals shorter than %s "+
				"(the window − stop-timeout − stop margin − one renew interval; a leader retries at least every renew-interval/4, "+
				"so one may still end at its stop-by time when the lift comes just before it): %d",
				k, r[1], r[0], r[2], tab.keepBound.Round(time.Millisecond), r[3])
		}
	}
	return s
}

// tornNote accounts for the lines torn by a SIGKILL during their write.
func (tab *table) tornNote() string {
	if len(tab.torn) == 0 {
		return "\ntorn lines (a writer SIGKILLed during its write): 0"
	}
	return fmt.Sprintf("\ntorn lines (a writer SIGKILLed during its write), dropped: %d: %s", len(tab.torn), strings.Join(tab.torn, "; "))
}

// text renders the table for the test log.
func (tab *table) text() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, l := range tab.lines() {
		fmt.Fprintln(w, strings.Join(l, "\t"))
	}
	_ = w.Flush()
	return b.String() + tab.footer() + "\n"
}

// markdown renders the table for docs/SAFETY.md.
func (tab *table) markdown() string {
	var b strings.Builder
	for i, l := range tab.lines() {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(l, " | "))
		if i == 0 {
			fmt.Fprintf(&b, "|%s\n", strings.Repeat(" --- |", len(l)))
		}
	}
	return b.String() + "\n" + tab.footer() + "\n"
}

// msec renders d in milliseconds.
func msec(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
