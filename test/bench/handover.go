package main

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

const (
	handoverTTL    = 2 * time.Second
	handoverTarget = 20 * time.Millisecond
	handoverSettle = 200 * time.Millisecond // after the successor is queued, before a trial
)

// handoverWhat is what a handover mode measures (handover, zkHandover).
var handoverWhat = map[string]string{
	"resign":  "POST /resign: old child's exit → new child's start",
	"sigterm": "SIGTERM to electd: old child's exit → new child's start",
	"exit":    "child exits by itself (--on-exit resign): exit → new child's start",
}

// handover measures graceful handovers, one figure at a time.
func (e *env) handover(ctx context.Context) error {
	const sec = "Graceful handover"
	for _, b := range e.backends() {
		for _, mode := range []string{"resign", "sigterm", "exit"} {
			gaps, total, err := e.handoverElectd(ctx, b, mode)
			if err != nil {
				e.rep.failed(fmt.Sprintf("handover %s %s", b.name, mode), err)
				continue
			}
			d := summarize(gaps)
			what := handoverWhat[mode]
			e.rep.add(sec, "electd, "+b.name, what, d.short(), "p99 < 20 ms", verdict(d.n > 0 && d.p99 < handoverTarget))
			e.rep.note(sec, "electd on %s, %s: %s; from the request/signal to the new child's start: %s.", b.name, mode, d, summarize(total))
		}
	}
	for _, peer := range []struct {
		tool, subject, figure, note string
		gaps                        func(context.Context) ([]time.Duration, error)
	}{
		{"etcdctl lock", "etcdctl lock, etcd", "command exits: exit → next waiter's command starts",
			"etcdctl lock --ttl 2 (the benchmark stops the command with SIGTERM once the next waiter is queued): %s.", e.handoverLock},
		{"etcdctl elect", "etcdctl elect, etcd", "SIGTERM to the leader → successor prints its key",
			"etcdctl elect (no command: \"start\" is the successor printing its key, which it does after one more Get): %s.", e.handoverElect},
	} {
		gaps, err := peer.gaps(ctx)
		if err != nil {
			e.rep.failed("handover "+peer.tool, err)
			continue
		}
		d := summarize(gaps)
		e.rep.add(sec, peer.subject, peer.figure, d.short(), "(peer)", "")
		e.rep.note(sec, peer.note, d)
	}
	if put, get, rset, err := e.storeLatency(ctx); err == nil {
		e.rep.note(sec, "Store round trips on this machine, for reading the figures (200 sequential requests each): etcd Put %s, etcd Get %s (linearizable), Redis SET %s.", put, get, rset)
	}
	e.rep.note(sec, "Each figure: median / p99 over %d handovers (nearest rank: with 30 samples p99 is the largest), each started 200 ms after the successor is queued in the store (for every tool); electd --ttl %s, default stop-timeout, --cool-down 100ms; \"child exits by itself\": the benchmark sends SIGTERM to the child, not to electd. Times are those the recorder child writes at its start and exit (its start line comes after exec and Go's runtime start).", e.cfg.trials, handoverTTL)
	return nil
}

// handoverElectd runs trials of one mode with two copies and returns the
// gaps (old child's exit → new child's start) and the times from the
// request or signal to the new child's start.
func (e *env) handoverElectd(ctx context.Context, b *backend, mode string) (gaps, total []time.Duration, err error) {
	c := e.newCluster(b, "handover-"+mode, handoverTTL, nil, nil)
	defer c.close()
	defer func() { err = c.describeErr(err) }()
	if _, _, err := c.startPair(ctx, 3*handoverTTL+5*time.Second); err != nil {
		return nil, nil, err
	}
	parts := newCollector()
	defer func() {
		if a := summarize(parts.get("acquire")); a.n > 0 {
			e.rep.note("Graceful handover", "electd on %s, %s, where the gap goes (medians / p99, from electd's own log lines): old child's exit → successor's supervisor leading %s; → child spawned %s; → the child's first line %s.",
				b.name, mode, a.short(), summarize(parts.get("spawn")).short(), summarize(parts.get("init")).short())
		}
	}()
	for range e.cfg.trials {
		sleepCtx(ctx, handoverSettle)
		lead, cur, err := c.waitLeading(ctx, 5*time.Second)
		if err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		switch mode {
		case "resign":
			err = lead.resign()
		case "sigterm":
			err = lead.signal(syscall.SIGTERM)
		default: // the child exits on its own: electd did not ask it to
			err = syscall.Kill(cur.Pid, syscall.SIGTERM)
		}
		if err != nil {
			return nil, nil, err
		}
		next, err := c.nextRun(ctx, cur, 10*time.Second)
		if err != nil {
			return nil, nil, err
		}
		old, _ := c.rec.get(cur.Pid)
		if old.Stop.IsZero() {
			return nil, nil, fmt.Errorf("%s: the old child %s has no stop line", mode, &old)
		}
		gap := next.Start.Sub(old.Stop)
		if gap <= 0 {
			e.rep.violation("%s handover on %s: new child %s started %s before the old one %s stopped", mode, b.name, &next, ms(-gap), &old)
		}
		gaps = append(gaps, gap)
		total = append(total, next.Start.Sub(t0))
		if succ := c.nodes[next.Node]; succ != nil {
			leading := lastBefore(succ.logTimes("leading"), next.Start)
			spawned := lastBefore(succ.logTimes("started"), next.Start)
			if !leading.IsZero() && !spawned.IsZero() && leading.After(old.Stop) {
				parts.add("acquire", leading.Sub(old.Stop))
				parts.add("spawn", spawned.Sub(leading))
				parts.add("init", next.Start.Sub(spawned))
			}
		}
		if mode == "sigterm" {
			if !lead.p.Wait(10 * time.Second) {
				return nil, nil, fmt.Errorf("%s did not exit within 10s of SIGTERM", lead.id)
			}
			if code := lead.p.ExitCode(); code != 0 {
				e.rep.note("Graceful handover", "electd on %s exited with %d after SIGTERM (want 0).", b.name, code)
			}
			if _, err := c.add(ctx); err != nil {
				return nil, nil, err
			}
		}
		if err := c.waitQueued(ctx, 2, 10*time.Second); err != nil {
			return nil, nil, err
		}
	}
	c.checkOverlaps(e.rep)
	return gaps, total, nil
}

// handoverLock: `etcdctl lock --ttl 2 NAME -- recorder`; once a second
// etcdctl waits, the benchmark stops the holder's command (SIGTERM to the
// command, which exits 0): etcdctl unlocks and the waiter's command starts.
func (e *env) handoverLock(ctx context.Context) ([]time.Duration, error) {
	q := e.newLockQueue("bench-lock-handover", handoverTTL)
	defer q.close()
	if _, err := q.add(); err != nil {
		return nil, err
	}
	if err := q.waitFirst(ctx, "the first command"); err != nil {
		return nil, err
	}
	var gaps []time.Duration
	for range e.cfg.trials {
		if _, err := q.add(); err != nil {
			return nil, err
		}
		if err := q.waitQueued(ctx, 2, 10*time.Second); err != nil {
			return nil, err
		}
		sleepCtx(ctx, handoverSettle)
		cur, ok := q.rec.current()
		if !ok {
			return nil, fmt.Errorf("etcdctl lock: no command running")
		}
		if err := syscall.Kill(cur.Pid, syscall.SIGTERM); err != nil {
			return nil, err
		}
		next, err := q.rec.nextRun(ctx, 10*time.Second, "the next command", cur)
		if err != nil {
			return nil, err
		}
		old, _ := q.rec.get(cur.Pid)
		if old.Stop.IsZero() {
			return nil, fmt.Errorf("etcdctl lock: command %s has no stop line", &old)
		}
		gaps = append(gaps, next.Start.Sub(old.Stop))
	}
	return gaps, nil
}

// handoverElect: `etcdctl elect NAME pN`, SIGTERM to the leader, time until
// the next one prints its key.
func (e *env) handoverElect(ctx context.Context) ([]time.Duration, error) {
	const name = "bench-elect-handover"
	cli := e.etcd.etcd.cli
	var all []*ctlProc
	defer func() {
		for _, p := range all {
			p.p.killGroup()
		}
	}()
	seq := 0
	spawn := func() (*ctlProc, error) {
		seq++
		p, err := e.startElect(e.etcd.etcd.addr, name, fmt.Sprintf("p%d", seq))
		if err == nil {
			all = append(all, p)
		}
		return p, err
	}
	lead, err := spawn()
	if err != nil {
		return nil, err
	}
	if _, err := lead.waitWon(ctx, 10*time.Second); err != nil {
		return nil, err
	}
	next, err := spawn()
	if err != nil {
		return nil, err
	}
	if err := waitKeys(ctx, cli, name+"/", 2, 10*time.Second); err != nil {
		return nil, err
	}
	var gaps []time.Duration
	for range e.cfg.trials {
		sleepCtx(ctx, handoverSettle)
		t0 := time.Now()
		if err := lead.p.signal(syscall.SIGTERM); err != nil {
			return nil, err
		}
		won, err := next.waitWon(ctx, 10*time.Second)
		if err != nil {
			return nil, err
		}
		gaps = append(gaps, won.Sub(t0))
		if !lead.p.Wait(10 * time.Second) {
			return nil, fmt.Errorf("etcdctl elect %s did not exit after SIGTERM", lead.label)
		}
		lead = next
		if next, err = spawn(); err != nil {
			return nil, err
		}
		if err := waitKeys(ctx, cli, name+"/", 2, 10*time.Second); err != nil {
			return nil, err
		}
	}
	return gaps, nil
}

// storeLatency measures sequential round trips to the main servers.
func (e *env) storeLatency(ctx context.Context) (put, get, rset dist, err error) {
	var p, g, r []time.Duration
	cli := e.etcd.etcd.cli
	for i := range 200 {
		t := time.Now()
		if _, err := cli.Put(ctx, "bench-latency", fmt.Sprint(i)); err != nil {
			return put, get, rset, err
		}
		p = append(p, time.Since(t))
		t = time.Now()
		if _, err := cli.Get(ctx, "bench-latency"); err != nil {
			return put, get, rset, err
		}
		g = append(g, time.Since(t))
		t = time.Now()
		if err := e.redis.redis.cli.Set(ctx, "bench-latency", i, 0).Err(); err != nil {
			return put, get, rset, err
		}
		r = append(r, time.Since(t))
	}
	return summarize(p), summarize(g), summarize(r), nil
}
