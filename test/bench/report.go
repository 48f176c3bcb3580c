package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Sections of the report, in print order.
var sections = []string{
	"Graceful handover",
	"Crash failover",
	sentinelSec,
	redlockSec,
	kubeSec,
	zkSec,
	"Cut-off leader: step-down margin",
	"Lost lock: what the holder's command does",
	"Store cost: idle",
	renewSec,
	"Store cost: per leader change vs. candidates",
	"GET /leader under load",
	"Footprint",
}

type row struct {
	section, subject, figure, value, target, verdict string
	seq                                              int
}

// subjectRanks order rows within a section by the first prefix of their
// subject that matches: electd on etcd, then on Redis, then the peers; the
// baseline of its section (bare) comes first, any other subject last.
var subjectRanks = []struct {
	prefix string
	rank   int
}{
	{"electd, etcd", 0},
	{"electd, redis", 10},
	{"electd", 20},
	{"etcdctl lock", 30},
	{"etcdctl elect", 40},
	{"naive", 50},
	{"redsync", 60},
	{"bare", -10},
}

// inOrder are the sections whose rows keep the order they were added in
// (each figure's tools side by side), not subjectRanks'.
var inOrder = map[string]bool{redlockSec: true, renewSec: true, kubeSec: true, zkSec: true}

// rank orders rows within a section (subjectRanks), the short TTL before
// the long, campaign only before + view, and of two builds compared the
// baseline before the tree's.
func (x row) rank() int {
	s := x.subject
	r := 70
	for _, p := range subjectRanks {
		if strings.HasPrefix(s, p.prefix) {
			r = p.rank
			break
		}
	}
	if strings.Contains(s, "--ttl 15") || strings.Contains(s, "+ leader view") {
		r += 5
	}
	switch {
	case strings.Contains(s, ", "+baselineLabel+" "):
		r++
	case strings.Contains(s, ", "+treeLabel):
		r += 2
	}
	return r
}

// report collects figures from phases that may run concurrently.
type report struct {
	mu         sync.Mutex
	rows       []row
	notes      map[string][]string
	violations []string
	failures   []string
}

func newReport() *report { return &report{notes: map[string][]string{}} }

func (r *report) add(section, subject, figure, value, target, verdict string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, row{section, subject, figure, value, target, verdict, len(r.rows)})
}

func (r *report) note(section, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes[section] = append(r.notes[section], fmt.Sprintf(format, args...))
}

// violation records a broken safety property (the run exits 1).
func (r *report) violation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// failed records a measurement that could not be made (the run exits 1).
func (r *report) failed(what string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf("%s: %v", what, err))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// yesno is the verdict of a question that is not a target.
func yesno(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func (r *report) sorted() []row {
	r.mu.Lock()
	defer r.mu.Unlock()
	idx := map[string]int{}
	for i, s := range sections {
		idx[s] = i
	}
	rows := append([]row(nil), r.rows...)
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if idx[a.section] != idx[b.section] {
			return idx[a.section] < idx[b.section]
		}
		if a.rank() != b.rank() && !inOrder[a.section] {
			return a.rank() < b.rank()
		}
		return a.seq < b.seq
	})
	return rows
}

// text writes the table for a terminal.
func (r *report) text(w io.Writer) {
	rows := r.sorted()
	width := [4]int{7, 6, 6, 6}
	for _, x := range rows {
		for i, s := range []string{x.subject, x.figure, x.value, x.target} {
			width[i] = max(width[i], utf8.RuneCountInString(s))
		}
	}
	pad := func(s string, n int) string { return s + strings.Repeat(" ", max(0, n-utf8.RuneCountInString(s))) }
	cur := ""
	for _, x := range rows {
		if x.section != cur {
			cur = x.section
			fmt.Fprintf(w, "\n== %s\n", cur)
			fmt.Fprintf(w, "%s  %s  %s  %s  %s\n", pad("subject", width[0]), pad("figure", width[1]), pad("result", width[2]), pad("target", width[3]), "")
		}
		fmt.Fprintf(w, "%s  %s  %s  %s  %s\n", pad(x.subject, width[0]), pad(x.figure, width[1]), pad(x.value, width[2]), pad(x.target, width[3]), x.verdict)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range sections {
		if len(r.notes[s]) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nnotes, %s:\n", s)
		for _, n := range r.notes[s] {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	r.problems(w, "")
}

func (r *report) problems(w io.Writer, bullet string) {
	if len(r.violations) > 0 {
		fmt.Fprintf(w, "\nSAFETY VIOLATIONS (%d):\n", len(r.violations))
		for _, v := range r.violations {
			fmt.Fprintf(w, "%s  - %s\n", bullet, v)
		}
	}
	if len(r.failures) > 0 {
		fmt.Fprintf(w, "\nMEASUREMENTS THAT FAILED (%d):\n", len(r.failures))
		for _, v := range r.failures {
			fmt.Fprintf(w, "%s  - %s\n", bullet, v)
		}
	}
}

// markdown writes the tables and notes as Markdown.
func (r *report) markdown(w io.Writer) {
	rows := r.sorted()
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	cur := ""
	for _, x := range rows {
		if x.section != cur {
			if cur != "" {
				r.mdNotes(w, cur)
			}
			cur = x.section
			fmt.Fprintf(w, "\n### %s\n\n", cur)
			fmt.Fprintln(w, "| subject | figure | result | target | |")
			fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", esc(x.subject), esc(x.figure), esc(x.value), esc(x.target), esc(x.verdict))
	}
	if cur != "" {
		r.mdNotes(w, cur)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems(w, "")
}

func (r *report) mdNotes(w io.Writer, section string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.notes[section]) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, n := range r.notes[section] {
		fmt.Fprintf(w, "- %s\n", n)
	}
}
