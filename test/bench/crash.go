package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pidwatch "github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

const (
	shortTTL      = 2 * time.Second
	defaultTTL    = 15 * time.Second
	electTTL      = 60 * time.Second // etcdctl elect's session TTL (no flag)
	failoverSlack = 250 * time.Millisecond
	// etcdFailoverSlack is etcd's: its head waiter revokes the dead
	// leader's lease itself once it has proved it expired
	// (elector/etcd/expire.go), instead of waiting for etcd's 500 ms
	// lessor loop.
	etcdFailoverSlack = 50 * time.Millisecond
)

// revokedMsg is the head waiter's log line when it has revoked its
// leader's expired lease itself (elector/etcd/expire.go).
const revokedMsg = "leader's lease expired on the store; revoked it"

// slack is the crash-failover target's allowance over the TTL.
func (b *backend) slack() time.Duration {
	if b.etcd != nil {
		return etcdFailoverSlack
	}
	if b.zk != nil {
		return zkFailoverSlack
	}
	return failoverSlack
}

// shortFailover: kill -9 at --ttl 2s, electd on both backends and
// etcdctl lock --ttl 2, all in parallel (each in elections of its own).
func (e *env) shortFailover(ctx context.Context) error {
	e.parallel(ctx,
		func(ctx context.Context) { e.crashElectd(ctx, e.etcd, e.tree(), shortTTL, e.cfg.trials, e.cfg.groups) },
		func(ctx context.Context) { e.crashElectd(ctx, e.redis, e.tree(), shortTTL, e.cfg.trials, e.cfg.groups) },
		func(ctx context.Context) { e.crashLock(ctx, shortTTL, e.cfg.trials, e.cfg.groups) },
	)
	return nil
}

// longFailover: the same at the default TTL (15 s), and etcdctl elect with
// its fixed 60 s session TTL.
func (e *env) longFailover(ctx context.Context) error {
	g := max(1, min(10, e.cfg.longTrials))
	e.parallel(ctx,
		func(ctx context.Context) { e.crashElectd(ctx, e.etcd, e.tree(), defaultTTL, e.cfg.longTrials, g) },
		func(ctx context.Context) { e.crashElectd(ctx, e.redis, e.tree(), defaultTTL, e.cfg.longTrials, g) },
		func(ctx context.Context) { e.crashLock(ctx, defaultTTL, e.cfg.longTrials, g) },
		func(ctx context.Context) { e.crashElect(ctx, e.cfg.electTrials) },
	)
	return nil
}

// crashElectd: two copies per election, kill -9 of the leader's electd,
// time until the other's child starts; then a new copy joins. Every copy
// runs bd's binary.
func (e *env) crashElectd(ctx context.Context, b *backend, bd build, ttl time.Duration, trials, ngroups int) {
	const sec = "Crash failover"
	subj := bd.subject(fmt.Sprintf("electd, %s, --ttl %s", b.name, ttl))
	col := newCollector()
	var failures, void atomic.Int64
	var (
		mu     sync.Mutex
		splits []failoverSplit // etcd: split once every log is complete
	)
	err := trialGroups(trials, ngroups, func(g, n int) (err error) {
		c := e.newCluster(b, fmt.Sprintf("crash-%s%s-%d", bd.key, ttl, g), ttl, nil, nil)
		c.bin = bd.bin
		defer c.close()
		defer func() { err = c.describeErr(err) }()
		return c.runTrials(ctx, n, 3*ttl+5*time.Second, func(lead *node, cur record.Run) error {
			lead, cur, vu, err := c.validLeader(ctx, lead, cur, ttl)
			if err != nil {
				return err
			}
			// A void trial (the child had stopped before the kill: its
			// stop line, written on SIGTERM) is counted, not timed; the
			// overlap check still covers it.
			killed, isVoid, err := c.killLeader(ctx, lead, cur, ttl+10*time.Second, func(old record.Run, killed time.Time) {
				void.Add(1)
				logf("%s on %s: void trial: the child %s stopped %s before the kill", c.election, b.name, &old, ms(killed.Sub(old.End())))
			})
			if err != nil || isVoid {
				return err
			}
			var storeDeadline time.Time
			if b.redis != nil { // exact: the entry's deadline on Redis's clock
				if storeDeadline, err = redisDeadline(ctx, b, c.election, lead.id); err != nil {
					return err
				}
			}
			if gone, ok := pidwatch.GoneAt(cur.Pid, 2*time.Second, 500*time.Microsecond); ok {
				col.add("childGone", gone.Sub(killed))
			} else {
				failures.Add(1)
				e.rep.violation("%s: the child %s outlived its electd (kill -9) by 2s", c.election, &cur)
			}
			next, err := c.nextRun(ctx, cur, ttl+10*time.Second)
			if err != nil {
				return err
			}
			// The last renewal electd had acknowledged was sent at
			// vu − window; the store received it later, and the lease
			// lasts TTL from then: no new term before lastSend + TTL.
			bound := vu.Add(-window(ttl)).Add(ttl)
			if next.Start.Before(bound) {
				e.rep.violation("%s on %s: new child started %s after kill -9, %s BEFORE the old lease could lapse",
					c.election, b.name, ms(next.Start.Sub(killed)), ms(bound.Sub(next.Start)))
			}
			if !storeDeadline.IsZero() {
				if next.Start.Before(storeDeadline) {
					e.rep.violation("%s on redis: new child started %s before the old lease's deadline on Redis", c.election, ms(storeDeadline.Sub(next.Start)))
				}
				col.add("overStore", next.Start.Sub(storeDeadline))
			}
			col.add("failover", next.Start.Sub(killed))
			col.add("overBound", next.Start.Sub(bound))
			col.add("boundFromKill", bound.Sub(killed))
			if succ := c.nodes[next.Node]; succ != nil && b.etcd != nil {
				mu.Lock()
				splits = append(splits, failoverSplit{succ, killed, bound, next})
				mu.Unlock()
			}
			lead.p.Wait(5 * time.Second)
			if _, err := c.add(ctx); err != nil {
				return err
			}
			if err := c.waitQueued(ctx, 2, ttl+10*time.Second); err != nil {
				return err
			}
			return nil
		})
	})
	if err != nil {
		e.rep.failed(fmt.Sprintf("crash failover %s ttl %s", bd.on(b.name), ttl), err)
	}
	for _, x := range splits {
		x.add(col)
	}
	f := summarize(col.get("failover"))
	if f.n == 0 {
		return
	}
	over := summarize(col.get("overBound"))
	gone := summarize(col.get("childGone"))
	target := fmt.Sprintf("≤ TTL+%s (%s), ≥ lease bound", b.slack(), ms(ttl+b.slack()))
	ok := f.p99 <= ttl+b.slack() && over.min >= 0
	if st := summarize(col.get("overStore")); st.n > 0 && st.min < 0 {
		ok = false
	}
	e.rep.add(sec, subj, "kill -9 of the leader's electd → new child's start",
		f.short(), target, verdict(ok))
	e.rep.add(sec, subj, "new child's start − (last acknowledged renewal + TTL), min",
		ms(over.min), "≥ 0", verdict(over.min >= 0))
	if st := summarize(col.get("overStore")); st.n > 0 {
		e.rep.add(sec, subj, "new child's start − old lease's deadline read from Redis, min",
			ms(st.min), "≥ 0", verdict(st.min >= 0))
		e.rep.note(sec, "%s, --ttl %s: new child's start after the old lease's deadline on Redis: %s.", bd.on(b.name), ttl, st)
	}
	if ttl == shortTTL {
		e.rep.add(lostSec, subj, "kill -9 of electd",
			fmt.Sprintf("child gone after %s (Pdeathsig), successor's child %s after the kill (%d trials)", gone.short(), ms(f.min)+" or more", f.n),
			"stops before the successor?", yesno(gone.n == f.n))
	}
	e.rep.note(sec, "%s, --ttl %s, %d trials (%d elections in parallel): failover %s; over the lease bound %s; the killed electd's child was gone after %s (Pdeathsig).",
		bd.on(b.name), ttl, f.n, ngroups, f, over, gone)
	if v := void.Load(); v > 0 {
		e.rep.note(sec, "%s, --ttl %s: %d more trials void, not timed: the leader's child had stopped before the kill (its term was ending on its own, and it may release the lease once the child is gone).", bd.on(b.name), ttl, v)
	}
	if b.etcd != nil {
		e.etcdPartsNote(sec, col, b, bd, ttl, f.n)
	}
}

// failoverSplit is one etcd failover, to be split by its successor's log
// lines once the successor has written them all.
type failoverSplit struct {
	succ          *node
	killed, bound time.Time
	next          record.Run
}

// add splits the time of an etcd failover after the lease bound by the
// successor's log lines: its head waiter's revocation of the dead
// leader's lease (absent when etcd's lessor deleted it first), its
// supervisor leading, the child running (electd's "started" line, which
// may come after the child's own first line), the child's first line.
func (x failoverSplit) add(col *collector) {
	leading := lastBefore(x.succ.logTimes("leading"), x.next.Start)
	spawned := firstAfter(x.succ.logTimes("started"), leading)
	if leading.Before(x.killed) || spawned.IsZero() {
		col.add("unsplit", 0)
		return
	}
	if revoked := lastBefore(x.succ.logTimes(revokedMsg), leading); revoked.After(x.killed) {
		col.add("waiterRevoked", revoked.Sub(x.bound))
		col.add("revokedToLeading", leading.Sub(revoked))
	} else {
		col.add("lessorLeading", leading.Sub(x.bound))
	}
	col.add("leadingToSpawned", spawned.Sub(leading))
	col.add("spawnedToStart", x.next.Start.Sub(spawned))
}

// etcdPartsNote says where an etcd failover's time after the lease bound
// went, and whose deletion of the dead leader's key woke the successor.
func (e *env) etcdPartsNote(sec string, col *collector, b *backend, bd build, ttl time.Duration, n int) {
	waiter := summarize(col.get("waiterRevoked"))
	lessor := summarize(col.get("lessorLeading"))
	e.rep.add(sec, bd.subject(fmt.Sprintf("electd, %s, --ttl %s", b.name, ttl)), "dead leader's lease revoked by the head waiter / by etcd's lessor",
		fmt.Sprintf("%d / %d of %d", waiter.n, lessor.n, n), "", "")
	msg := fmt.Sprintf("%s, --ttl %s, after the lease bound (last acknowledged renewal + TTL), from the successor's log: the head waiter revoked the dead leader's lease itself in %d of %d failovers, %s after the bound",
		bd.on(b.name), ttl, waiter.n, n, waiter)
	if waiter.n > 0 {
		// electd renews every TTL/5; the head waiter looks once per
		// renewal interval.
		half, late := ttl/10, 0
		for _, d := range col.get("waiterRevoked") {
			if d > half {
				late++
			}
		}
		msg += fmt.Sprintf(" (%d of them more than half a renewal interval, %s, after it)", late, ms(half))
		msg += fmt.Sprintf(", and led %s after its revocation", summarize(col.get("revokedToLeading")))
	}
	if lessor.n > 0 {
		msg += fmt.Sprintf("; in %d etcd's lessor deleted the key first, and the successor led %s after the bound", lessor.n, lessor)
	}
	msg += fmt.Sprintf("; leading → electd's \"started\" line (the child runs) %s; that line → the child's first line %s (negative: the child wrote first).",
		summarize(col.get("leadingToSpawned")), summarize(col.get("spawnedToStart")))
	if u := len(col.get("unsplit")); u > 0 {
		msg += fmt.Sprintf(" %d failovers had no leading and started lines to split them by.", u)
	}
	e.rep.note(sec, "%s", msg)
}

// crashLock: etcdctl lock --ttl T, kill -9 of the holder's etcdctl.
func (e *env) crashLock(ctx context.Context, ttl time.Duration, trials, ngroups int) {
	const sec = "Crash failover"
	col := newCollector()
	var orphans, total atomic.Int64
	err := trialGroups(trials, ngroups, func(g, n int) error {
		q := e.newLockQueue(fmt.Sprintf("bench-lock-crash-%s-%d", ttl, g), ttl)
		defer q.close()
		if _, err := q.add(); err != nil {
			return err
		}
		if err := q.waitFirst(ctx, "first etcdctl lock command"); err != nil {
			return err
		}
		if _, err := q.add(); err != nil {
			return err
		}
		if err := q.waitQueued(ctx, 2, 10*time.Second); err != nil {
			return err
		}
		for range n {
			cur, ok := q.rec.current()
			if !ok {
				return fmt.Errorf("%s: no command running", q.name)
			}
			holder := q.holder(cur)
			killed := time.Now()
			if err := holder.p.signal(syscall.SIGKILL); err != nil {
				return err
			}
			next, err := q.rec.nextRun(ctx, ttl+10*time.Second, "the next etcdctl lock command", cur)
			if err != nil {
				return err
			}
			total.Add(1)
			if pidwatch.Alive(cur.Pid) {
				orphans.Add(1) // the killed etcdctl's command still runs beside the new one
			}
			procs.stray(cur.Pid, e.recorder)
			killIfOurs(cur.Pid, e.recorder)
			col.add("failover", next.Start.Sub(killed))
			holder.p.killGroup()
			if _, err := q.add(); err != nil {
				return err
			}
			if err := q.waitQueued(ctx, 2, ttl+10*time.Second); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.rep.failed(fmt.Sprintf("crash failover etcdctl lock ttl %s", ttl), err)
	}
	f := summarize(col.get("failover"))
	if f.n == 0 {
		return
	}
	e.rep.add(sec, fmt.Sprintf("etcdctl lock, etcd, --ttl %d", int(ttl/time.Second)), "kill -9 of the holder's etcdctl → next command's start",
		f.short(), "(peer)", "")
	e.rep.add(sec, fmt.Sprintf("etcdctl lock, etcd, --ttl %d", int(ttl/time.Second)), "killed holder's command still running when the next started",
		fmt.Sprintf("%d of %d", orphans.Load(), total.Load()), "(peer)", "")
	if ttl == shortTTL {
		e.rep.add(lostSec, "etcdctl lock --ttl 2", "kill -9 of etcdctl",
			fmt.Sprintf("command kept running (orphaned) when the successor's started: %d of %d", orphans.Load(), total.Load()),
			"stops before the successor?", yesno(orphans.Load() == 0))
	}
	e.rep.note(sec, "etcdctl lock --ttl %d, %d trials: failover %s. Its session renews every TTL/3, so the earliest lapse is TTL·2/3 after the kill. etcdctl does not tie its command's life to its own: after kill -9 the command keeps running (orphaned) next to its successor's — %d of %d times here (the benchmark then kills it).",
		int(ttl/time.Second), f.n, f, orphans.Load(), total.Load())
}

// crashElect: etcdctl elect (60 s session TTL, not settable), kill -9 of
// the leader, time until the next prints its key. One trial per election,
// all in parallel.
func (e *env) crashElect(ctx context.Context, trials int) {
	const sec = "Crash failover"
	if trials <= 0 {
		return
	}
	col := newCollector()
	err := groups(trials, func(g int) error {
		pair, err := e.startElectPair(ctx, fmt.Sprintf("bench-elect-crash-%d", g))
		defer pair.close()
		if err != nil {
			return err
		}
		killed := time.Now()
		if err := pair.a.p.signal(syscall.SIGKILL); err != nil {
			return err
		}
		won, err := pair.b.waitWon(ctx, electTTL+15*time.Second)
		if err != nil {
			return err
		}
		col.add("failover", won.Sub(killed))
		return nil
	})
	if err != nil {
		e.rep.failed("crash failover etcdctl elect", err)
	}
	f := summarize(col.get("failover"))
	if f.n == 0 {
		return
	}
	e.rep.add(sec, "etcdctl elect, etcd (60 s session)", "kill -9 of the leader → successor prints its key", f.short(), "(peer)", "")
	e.rep.note(sec, "etcdctl elect has no --ttl: its session TTL is the 60 s default; %d trials (in parallel elections): %s. Its keepalive runs every 20 s, so the lease lapses 40–60 s after a kill.", f.n, f)
}
