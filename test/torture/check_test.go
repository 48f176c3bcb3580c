package torture

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/electd/electd/supervisor"
	"github.com/electd/electd/test/record"
)

// staleBound bounds a resumed child's stale window: its electd, resumed
// with it, finds its deadline passed and stops it at once (SIGKILL, as no
// grace is left). Generous: the machine is small and shared.
func (c *cluster) staleBound() time.Duration { return c.cfg.stopTimeout + 2*time.Second }

// verify checks the record so far (sync the journal first):
//
//   - no two children's intervals overlap, a paused child's interval ending
//     at its last line before it was resumed, and tokens strictly increase
//     in start order; no worker wrote at or after the first line of a later
//     term, a paused child's workers counting until it was resumed
//     (record.Log.Check, exact);
//   - the fenced resource rejected no write of a child that was never
//     paused (that would be two terms writing interleaved), and rejected
//     every write a resumed child made after a newer term had written;
//   - a resumed child was gone within staleBound;
//   - no child outlived its electd: every run ended within goneBound of
//     its electd's SIGKILL (or exit), and so did every worker, where the
//     containment promises that (pidns, userns);
//   - no orphans: no worker is alive once a later term has begun, nor
//     goneBound after its electd was gone (where promised). Each is
//     counted, reported and SIGKILLed.
func (c *cluster) verify() []error {
	var errs []error
	if err := c.j.adjusted().Check(record.Options{}); err != nil {
		errs = append(errs, err)
	}
	if n := c.j.fence.wrongful; n > 0 {
		errs = append(errs, fmt.Errorf("the fenced resource rejected %d writes of children that were never paused (two terms wrote interleaved), e.g. %s",
			n, strings.Join(c.j.fence.examples, "; ")))
	}
	now := time.Now()
	for _, p := range c.j.pauses {
		if p.rejected != p.afterNewer {
			errs = append(errs, fmt.Errorf("paused child %s: %d of its %d writes after a newer term's were accepted",
				p.run, p.afterNewer-p.rejected, p.afterNewer))
		}
		window := p.window()
		if !p.run.Ended() && c.isChild(p.run) {
			window = now.Sub(p.resumed)
		}
		if window > c.staleBound() {
			errs = append(errs, fmt.Errorf("paused child %s ran %s after it was resumed, more than %s", p.run, window, c.staleBound()))
		}
	}
	for _, l := range c.lives {
		if !l.Exited() {
			continue
		}
		end := l.end()
		for _, r := range c.j.runs {
			if r.Node != l.node.id || r.Start.Before(l.Started) || r.Start.After(end) {
				continue
			}
			if over := r.End().Sub(end); over > goneBound {
				errs = append(errs, fmt.Errorf("child %s outlived its electd %s (pid %d, gone at %s) by %s",
					r, l.node.id, l.Pid(), end.Format("15:04:05.000000"), over))
			}
			if !r.Ended() && now.Sub(end) > goneBound && c.isChild(r) {
				errs = append(errs, fmt.Errorf("child %s is still alive %s after its electd %s was gone; killing it",
					r, now.Sub(end), l.node.id))
				_ = syscall.Kill(r.Pid, syscall.SIGKILL)
			}
			if !c.treeDies() {
				continue
			}
			for _, w := range c.j.workersOf(r) {
				if over := w.Last.Sub(end); over > goneBound {
					errs = append(errs, fmt.Errorf("worker %s outlived its electd %s (pid %d, gone at %s) by %s",
						w, l.node.id, l.Pid(), end.Format("15:04:05.000000"), over))
				}
				if now.Sub(end) > goneBound && c.isWorker(w) &&
					c.orphan(w, fmt.Sprintf("alive %s after its electd %s was gone", now.Sub(end), l.node.id)) {
					errs = append(errs, fmt.Errorf("orphan: %s is alive %s after its electd %s was gone (%s containment); killed it",
						w, now.Sub(end), l.node.id, c.containment))
				}
			}
		}
	}
	for _, w := range c.j.workers {
		next := c.j.next(w.run)
		if next == nil || !c.isWorker(w) {
			continue
		}
		if c.orphan(w, "alive after the next term began") {
			errs = append(errs, fmt.Errorf("orphan: %s is alive %s after the next term [%s] began; killed it",
				w, now.Sub(next.Start), next))
		}
	}
	return errs
}

// oldEnd is the end of the fault's old child's whole tree: the later of
// its main process's and its workers' last lines; for a paused one, their
// last lines before it was resumed.
func (f *fault) oldEnd(j *journal) time.Time { return j.treeEnd(f.old) }

// gapName names the old end → new start figure: a handover when electd
// stopped the child on purpose, a step-down margin when it had to give up
// its lease (the new term could start only after the old lease lapsed on
// the store, so this is how long before that the old child was gone).
func gapName(k kind) string {
	switch k {
	case sigtermElectd, resign, kill9Child, kill9Main:
		return "handover gap (old end → new start)"
	}
	return "step-down margin (old end → new start)"
}

// minAhead is how long before the latest possible ValidUntil a cut-off
// leader's child must be gone. electd SIGTERMs it at ValidUntil −
// stop-timeout − StopMargin and SIGKILLs it at ValidUntil − StopMargin at
// the latest; half the margin is left to scheduling delays on a busy host.
const minAhead = supervisor.StopMargin / 2

// earlySuccessor reports a next term that the store let begin before the
// deadline the old term had earned (issue 22's hole on an etcd cluster),
// whether or not the children overlapped: the supervisor gives a term up
// stop-timeout plus the stop margin before its deadline, so the record
// shows only a larger hole. The old electd's own revocation of its lease
// is not such a case (termGap leaves it out).
func (f *fault) earlySuccessor() error {
	if f.early <= 0 {
		return nil
	}
	return fmt.Errorf("%s (token %d) was elected %s before the deadline %s (token %d) had earned: the store granted the next term while the old one was still valid",
		f.next.Node, f.next.Token, f.early, f.old.Node, f.old.Token)
}

// stoppedLate reports a leader cut off from the store (cut-leader,
// store-restart; partition-majority: from a majority of a Redlock quorum's
// servers) whose child was gone less than minAhead before the latest
// possible deadline: every renewal acknowledged to it (by a majority) was
// sent before f.lost, so its ValidUntil was at most f.lost + window.
func (f *fault) stoppedLate(j *journal) error {
	if f.window == 0 || f.ahead >= minAhead { // not measured, or in time
		return nil
	}
	return fmt.Errorf("the cut-off leader's child %s was gone only %s before its latest possible deadline (store link lost at %s, + %s), less than %s",
		j.run(f.old.Pid), f.ahead, f.lost.Format("15:04:05.000000"), f.window, minAhead)
}

// measure computes f's figures once the cluster has settled after it.
func (c *cluster) measure(f *fault) {
	add := func(name string, d time.Duration) { f.figs = append(f.figs, figure{name, d}) }
	if f.old != nil {
		f.next = c.j.next(f.old)
	}
	if f.next != nil {
		end := f.oldEnd(c.j)
		add(figFailover, f.next.Start.Sub(f.at))
		add(gapName(f.kind), f.next.Start.Sub(end))
		switch f.kind {
		case cutLeader, slowLeader, storeRestart, resetLeader, partitionMajority:
			add(figStopped, end.Sub(f.at))
		}
		if !f.lost.IsZero() && end.Before(f.healed) {
			f.window = c.cfg.window
			f.ahead = f.lost.Add(f.window).Sub(end)
			add(figAhead, f.ahead)
		}
	}
	if !f.storeUp.IsZero() {
		add(figStoreUp, f.storeUp.Sub(f.at))
	}
	if !f.raftUp.IsZero() {
		add(figRaftUp, f.raftUp.Sub(f.at))
	}
	if f.transferred > 0 {
		add(figTransfer, f.transferred)
	}
	if f.stepDown > 0 {
		add(figStepDown, f.stepDown)
	}
	if f.next != nil && slices.Contains(memberKinds, f.kind) { // the etcd cluster's own
		if gap, ok := c.termGap(f); ok {
			add(figTermGap, gap)
			if gap < 0 {
				f.early = -gap
				f.note += fmt.Sprintf("; EARLY SUCCESSOR: the next term was elected %s before the deadline the old one had earned", ms(-gap))
			}
		}
	}
	if f.whole > 0 {
		add(figWhole, f.whole)
	}
	if f.kind == kill9Electd {
		add(figChildGone, f.childGone)
	}
	if len(f.workers) > 0 && (f.kind == kill9Electd || f.kind == kill9Main) {
		if f.treeGone > 0 {
			add(figTreeGone, f.treeGone)
		}
		var last time.Time
		for _, w := range f.workers {
			last = maxTime(last, w.Last)
		}
		add(figLastWorker, last.Sub(f.at))
		if f.kind == kill9Main {
			// From the main process's own last line (it died within a
			// beat of it), so that a late kill by a busy harness does not
			// count: how long the workers outlived the main process.
			mainEnd := c.j.run(f.old.Pid).End()
			add(figMainLast, mainEnd.Sub(f.at))
			add(figWorkerTail, last.Sub(mainEnd))
		}
	}
	if f.pause != nil {
		add(figStale, f.pause.window())
	}
	add(figRecovery, f.recovery)
}

// Figure names.
const (
	figFailover  = "failover (fault → new child starts)"
	figStopped   = "old child gone after the fault"
	figChildGone = "child gone after kill -9 of electd"
	figStale     = "stale window after resume"
	figRecovery  = "recovery (heal → a child runs)"
	figAhead     = "old child gone before its latest possible deadline"
	// The topology faults that move the election's keys: from the fault
	// to the new master taking writes (testenv's probe write).
	figStoreUp = "store failover (fault → new master takes writes)"
	// kill-raft-leader, partition-raft-leader: from the fault to the
	// other two members naming the same new raft leader (Status).
	figRaftUp = "raft failover (fault → the others follow a new leader)"
	// transfer-partition-raft-leader: from MoveLeader to the transferee
	// naming itself the leader (its own Status).
	figTransfer = "raft transfer (MoveLeader → the new one leads)"
	// pinned-partition-raft-leader, transfer-partition-raft-leader: from
	// the cut to the cut-off raft leader naming itself the leader no more
	// (its own Status): how long it may have acknowledged renewals.
	figStepDown = "cut-off raft leader stepped down (cut → it names no leader)"
	// The etcd cluster's own kinds, when a new term followed: from the old
	// term's last deadline (its electd's last valid_until) to the next
	// term's election (its electd's "elected" line). Negative: the next
	// term began before the deadline the old one had earned (termGap).
	figTermGap = "term gap (old deadline → new term elected; < 0: early)"
	// server-kill, minority-restart, rolling-restart: from the restarted
	// servers' start to every server holding one committed term again.
	figWhole = "quorum whole again (heal → every server holds the term)"
	// kill9-main, and kill9-electd of a child with workers: from the kill
	// to the last worker gone from /proc, and to the last line any worker
	// wrote (negative: it wrote last before the kill, within a beat).
	figTreeGone   = "last worker gone after the kill"
	figLastWorker = "last worker line after the kill"
	// kill9-main: from the kill to the main process's last line, and from
	// that line to the last worker line.
	figMainLast   = "main's last line after the kill"
	figWorkerTail = "last worker line after the main's last line"
)

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// figure is one measured duration of a fault.
type figure struct {
	name string
	d    time.Duration
}

// describe is the one-line account of f, for the test log.
func (f *fault) describe() string {
	s := fmt.Sprintf("#%d %s", f.seq, f.kind)
	if f.target != "" {
		s += " " + f.target
	}
	if f.note != "" {
		s += " (" + f.note + ")"
	}
	if f.old != nil {
		s += fmt.Sprintf(": leader %s token %d", f.old.Node, f.old.Token)
	}
	if f.next != nil {
		s += fmt.Sprintf("; next %s token %d", f.next.Node, f.next.Token)
	} else if f.old != nil {
		s += "; same term"
	}
	if p := f.pause; p != nil {
		s += fmt.Sprintf("; %d writes after resume, %d after a newer term's, %d rejected by the fence",
			p.staleLines, p.afterNewer, p.rejected)
	}
	for _, g := range f.figs {
		s += fmt.Sprintf("; %s %s", g.name, ms(g.d))
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
