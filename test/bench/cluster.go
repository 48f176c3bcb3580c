package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	pidwatch "github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// cluster is one election of electd processes whose children (the
// recorder) write one record log.
type cluster struct {
	e        *env
	b        *backend
	election string
	ttl      time.Duration
	bin      string   // electd binary; "": the tree's production build
	args     []string // more electd flags
	env      []string // more environment (RECORD_*)
	store    func(id string) string
	envFor   func(id string) []string // more environment of one copy; nil: none
	rec      *recLog
	nodes    map[string]*node
	order    []*node
	seq      int
}

func (e *env) newCluster(b *backend, election string, ttl time.Duration, args, envs []string) *cluster {
	return &cluster{
		e: e, b: b, election: election, ttl: ttl, args: args, env: envs,
		store: func(string) string { return b.url },
		rec:   newRecLog(filepath.Join(e.dir, "record-"+b.name+"-"+election+".log")),
		nodes: map[string]*node{},
	}
}

// add starts one more copy running the recorder.
func (c *cluster) add(ctx context.Context) (*node, error) {
	c.seq++
	id := fmt.Sprintf("n%d", c.seq)
	env := append([]string{"RECORD_LOG=" + c.rec.path}, c.env...)
	if c.envFor != nil {
		env = append(env, c.envFor(id)...)
	}
	n, err := c.e.startNode(ctx, nodeSpec{
		election: c.election, id: id, store: c.store(id), ttl: c.ttl, bin: c.bin,
		args:    append([]string{"--cool-down", "100ms"}, c.args...),
		env:     env,
		command: []string{c.e.recorder},
		dir:     c.e.dir,
	})
	if err != nil {
		return nil, err
	}
	c.nodes[id] = n
	c.order = append(c.order, n)
	return n, nil
}

// startPair starts a first copy, waits until its child runs (within), then
// a second copy, and waits until both are queued in the store: a leader and
// its successor. It returns the leader and its child.
func (c *cluster) startPair(ctx context.Context, within time.Duration) (*node, record.Run, error) {
	if _, err := c.add(ctx); err != nil {
		return nil, record.Run{}, err
	}
	lead, cur, err := c.waitLeading(ctx, within)
	if err != nil {
		return nil, cur, err
	}
	if _, err := c.add(ctx); err != nil {
		return nil, cur, err
	}
	if err := c.waitQueued(ctx, 2, 10*time.Second); err != nil {
		return nil, cur, err
	}
	return lead, cur, nil
}

// runTrials starts a leader and its successor (startPair: the first child
// within leadWithin), then runs trial n times, each on the leader of the
// moment and its child; once all have passed it records every two children
// that ran at once as a violation.
func (c *cluster) runTrials(ctx context.Context, n int, leadWithin time.Duration, trial func(lead *node, cur record.Run) error) error {
	if _, _, err := c.startPair(ctx, leadWithin); err != nil {
		return err
	}
	for range n {
		lead, cur, err := c.waitLeading(ctx, 5*time.Second)
		if err != nil {
			return err
		}
		if err := trial(lead, cur); err != nil {
			return err
		}
	}
	c.checkOverlaps(c.e.rep)
	return nil
}

// validLeader returns lead's ValidUntil. If its term ended on its own
// meanwhile (a store too slow to renew against, while its child was being
// stopped), the trial is the next leader's: it returns that one, with its
// child's run, trying up to three times.
func (c *cluster) validLeader(ctx context.Context, lead *node, cur record.Run, ttl time.Duration) (*node, record.Run, time.Time, error) {
	vu, err := lead.validUntil()
	for try := 0; errors.Is(err, errNotLeading) && try < 3; try++ {
		if _, _, err := c.waitEnd(ctx, cur.Pid, 2*ttl+10*time.Second); err != nil {
			return nil, cur, time.Time{}, err
		}
		if lead, cur, err = c.waitLeading(ctx, 2*ttl+10*time.Second); err != nil {
			return nil, cur, time.Time{}, err
		}
		vu, err = lead.validUntil()
	}
	return lead, cur, vu, err
}

// waitLeading waits until a child runs and returns it and its node.
func (c *cluster) waitLeading(ctx context.Context, within time.Duration) (*node, record.Run, error) {
	var (
		n *node
		r record.Run
	)
	err := waitUntil(ctx, within, func() bool {
		cur, ok := c.rec.current()
		if !ok {
			return false
		}
		n, r = c.nodes[cur.Node], cur
		return n != nil && !n.p.Exited()
	})
	if err != nil {
		return nil, r, fmt.Errorf("%s: no leader with a running child: %w", c.election, err)
	}
	return n, r, nil
}

// waitQueued waits until the store holds want candidates.
func (c *cluster) waitQueued(ctx context.Context, want int, within time.Duration) error {
	var got int
	var qerr error
	err := waitUntil(ctx, within, func() bool {
		got, qerr = c.b.queued(ctx, c.election)
		return qerr == nil && got == want
	})
	if err != nil {
		return fmt.Errorf("%s: %d candidates queued, want %d (%v): %w", c.election, got, want, qerr, err)
	}
	return nil
}

// killLeader kill -9s lead, whose child is cur, and returns when. A child
// that had stopped before the kill belonged to a leader already ending its
// term, which it may release once the child is gone: then the successor
// may lead before the lease could lapse, and the trial measures no crash.
// Such a trial is void: onVoid is told of the child, the cluster is made
// whole again (the successor's run, then a new copy queued, each within
// within) and void is true.
func (c *cluster) killLeader(ctx context.Context, lead *node, cur record.Run, within time.Duration,
	onVoid func(old record.Run, killed time.Time)) (killed time.Time, void bool, err error) {
	killed = time.Now()
	if err := lead.signal(syscall.SIGKILL); err != nil {
		return killed, false, err
	}
	old, _ := c.rec.get(cur.Pid)
	if !old.Ended() || old.End().After(killed) {
		return killed, false, nil
	}
	onVoid(old, killed)
	if _, err := c.nextRun(ctx, cur, within); err != nil {
		return killed, true, err
	}
	lead.p.Wait(5 * time.Second)
	if _, err := c.add(ctx); err != nil {
		return killed, true, err
	}
	return killed, true, c.waitQueued(ctx, 2, within)
}

// nextRun waits for the first run that started after prev on another node.
func (c *cluster) nextRun(ctx context.Context, prev record.Run, within time.Duration) (record.Run, error) {
	return c.rec.nextRun(ctx, within, "the child after "+prev.String(), prev)
}

// waitEnd waits until the child with pid has ended: its stop or exit line
// (graceful), or the process gone (killed: the time it was seen gone,
// polled every millisecond).
func (c *cluster) waitEnd(ctx context.Context, pid int, within time.Duration) (end time.Time, graceful bool, err error) {
	deadline := time.Now().Add(within)
	for {
		gone := !pidwatch.Alive(pid)
		seen := time.Now()
		if r, ok := c.rec.get(pid); ok && r.Ended() {
			return r.End(), true, nil
		}
		if gone {
			return seen, false, nil
		}
		if ctx.Err() != nil || seen.After(deadline) {
			return time.Time{}, false, fmt.Errorf("%s: child %d still running after %s: %v", c.election, pid, within, ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
}

// checkOverlaps records a violation for every pair of overlapping children.
func (c *cluster) checkOverlaps(rep *report) {
	for _, o := range c.rec.overlaps() {
		rep.violation("%s on %s: two children at once: %v", c.election, c.b.name, o)
	}
}

// close kills every copy and any child left behind.
func (c *cluster) close() {
	for _, n := range c.order {
		n.kill()
	}
	c.rec.killRecorders(c.e.recorder)
}

// describeErr adds the tail of every copy's log to err.
func (c *cluster) describeErr(err error) error {
	if err == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v", err)
	for _, n := range c.order {
		fmt.Fprintf(&b, "\n--- %s (%s):\n%s", n.id, n.log, tailFile(n.log, 8))
	}
	return fmt.Errorf("%s", b.String())
}
