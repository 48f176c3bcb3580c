package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/faultproxy"
	pidwatch "github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

const lostSec = "Lost lock: what the holder's command does"

// lostLock measures what happens to the holder's command when the lock is
// lost, for each tool, all cases in parallel (each on a lock of its own).
func (e *env) lostLock(ctx context.Context) error {
	e.tryParallel(ctx,
		tried{"lost: etcdctl lock revoke", func(ctx context.Context) error { return e.lockLost(ctx, "revoke") }},
		tried{"lost: etcdctl lock cut", func(ctx context.Context) error { return e.lockLost(ctx, "cut") }},
		tried{"lost: etcdctl lock SIGTERM", e.lockSIGTERM},
		tried{"lost: electd revoke", e.electdRevoke},
		tried{"lost: naive redis cut", e.naiveCut},
	)
	return nil
}

func (e *env) try(what string, f func() error) {
	if err := f(); err != nil {
		e.rep.failed(what, err)
		logf("%s: %v", what, err)
	}
}

// lockLost: etcdctl lock holder H and waiter W; H's lease is revoked, or
// H's connection to etcd is black-holed. Does H's command keep running once
// W's command has started?
func (e *env) lockLost(ctx context.Context, how string) error {
	const ttl = 2 * time.Second
	name := "bench-lock-lost-" + how
	rec := newRecLog(e.dir + "/record-" + name + ".log")
	endpoint := e.etcd.etcd.addr
	var px *faultproxy.Proxy
	if how == "cut" {
		var err error
		if px, err = faultproxy.New(e.etcd.etcd.addr); err != nil {
			return err
		}
		defer px.Close()
		endpoint = px.Addr()
	}
	h, err := e.startLock(endpoint, name, ttl, "h", 1, rec.path)
	if err != nil {
		return err
	}
	defer h.p.killGroup()
	hr, err := rec.waitRun(ctx, 10*time.Second, "the holder's command", func(r record.Run) bool { return r.Node == "h" })
	if err != nil {
		return err
	}
	w, err := e.startLock(e.etcd.etcd.addr, name, ttl, "w", 2, rec.path)
	if err != nil {
		return err
	}
	defer w.p.killGroup()
	if err := waitKeys(ctx, e.etcd.etcd.cli, name+"/", 2, 10*time.Second); err != nil {
		return err
	}
	t0 := time.Now()
	action := ""
	if how == "revoke" {
		lease, _, err := firstLease(ctx, e.etcd.etcd.cli, name+"/")
		if err != nil {
			return err
		}
		if _, err := e.etcd.etcd.cli.Revoke(ctx, lease); err != nil {
			return err
		}
		action = "lease revoked (etcdctl lease revoke)"
	} else {
		px.Cut()
		action = "holder cut off from etcd (black hole)"
	}
	wr, err := rec.waitRun(ctx, ttl+10*time.Second, "the waiter's command", func(r record.Run) bool { return r.Node == "w" })
	if err != nil {
		return err
	}
	sleepCtx(ctx, time.Second)
	now, _ := rec.get(hr.Pid)
	keeps := pidwatch.Alive(hr.Pid) && !now.Ended()
	res := fmt.Sprintf("successor's command started %s after; the old one was still running %s later", ms(wr.Start.Sub(t0)), ms(time.Since(wr.Start)))
	if !keeps {
		res = fmt.Sprintf("successor's command started %s after; the old one had exited", ms(wr.Start.Sub(t0)))
	}
	e.rep.add(lostSec, "etcdctl lock --ttl 2", action, res, "stops before the successor?", yesno(!keeps))
	return nil
}

// lockSIGTERM: SIGTERM to etcdctl lock while its command runs.
func (e *env) lockSIGTERM(ctx context.Context) error {
	name := "bench-lock-sigterm"
	rec := newRecLog(e.dir + "/record-" + name + ".log")
	h, err := e.startLock(e.etcd.etcd.addr, name, 2*time.Second, "h", 1, rec.path)
	if err != nil {
		return err
	}
	defer h.p.killGroup()
	hr, err := rec.waitRun(ctx, 10*time.Second, "the holder's command", func(record.Run) bool { return true })
	if err != nil {
		return err
	}
	if err := h.p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	sleepCtx(ctx, time.Second)
	cmdAlive, ctlAlive := pidwatch.Alive(hr.Pid), !h.p.Exited()
	e.rep.add(lostSec, "etcdctl lock --ttl 2", "SIGTERM to etcdctl while its command runs",
		fmt.Sprintf("1 s later: etcdctl running %v, command running %v", ctlAlive, cmdAlive), "(peer)", "")
	return nil
}

// electdRevoke: the leader's lease is revoked by hand on etcd. electd
// watches its own key: the term ends at once, but the successor, woken by
// the same deletion, may be granted first.
func (e *env) electdRevoke(ctx context.Context) (err error) {
	c := e.newCluster(e.etcd, "lost-revoke", shortTTL, nil, nil)
	defer c.close()
	defer func() { err = c.describeErr(err) }()
	_, cur, err := c.startPair(ctx, 10*time.Second)
	if err != nil {
		return err
	}
	lease, _, err := firstLease(ctx, e.etcd.etcd.cli, "/electd/elections/"+c.election+"/")
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := e.etcd.etcd.cli.Revoke(ctx, lease); err != nil {
		return err
	}
	end, graceful, err := c.waitEnd(ctx, cur.Pid, 5*time.Second)
	if err != nil {
		return err
	}
	next, err := c.nextRun(ctx, cur, 10*time.Second)
	if err != nil {
		return err
	}
	overlap := end.Sub(next.Start)
	how := "stopped"
	if !graceful {
		how = "SIGKILLed"
	}
	res := fmt.Sprintf("child %s %s after the revoke, successor's child started %s after the revoke", how, ms(end.Sub(t0)), ms(next.Start.Sub(t0)))
	if overlap > 0 {
		res += fmt.Sprintf(" (overlap %s)", ms(overlap))
	}
	e.rep.add(lostSec, "electd, etcd, --ttl 2s", "lease revoked by hand (operator action)", res, "stops before the successor?", yesno(overlap <= 0))
	return nil
}

// naiveCut: the naive Redis lock. The holder took SET NX PX 2000 and renews
// with PEXPIRE every 2/3 s, stopping its work when a renewal fails or finds
// the key gone; waiters retry SET NX PX every 10 ms. The holder's connection
// is black-holed.
func (e *env) naiveCut(ctx context.Context) error {
	const ttl = 2 * time.Second
	px, err := faultproxy.New(e.redis.addr())
	if err != nil {
		return err
	}
	defer px.Close()
	// go-redis defaults, as in most code: 3 s read timeout, 3 retries.
	hc := goredis.NewClient(&goredis.Options{Addr: px.Addr()})
	defer hc.Close()
	wc := goredis.NewClient(&goredis.Options{Addr: e.redis.addr()})
	defer wc.Close()
	key := "bench-naive-lock-cut"
	if ok, err := hc.SetNX(ctx, key, "holder", ttl).Result(); err != nil || !ok {
		return fmt.Errorf("naive holder: SET NX %v %v", ok, err)
	}
	var (
		mu                 sync.Mutex
		lostAt, acquiredAt time.Time
	)
	hctx, hcancel := context.WithTimeout(ctx, 40*time.Second)
	defer hcancel()
	done := make(chan struct{}, 2)
	go func() { // holder
		defer func() { done <- struct{}{} }()
		for hctx.Err() == nil {
			sleepCtx(hctx, ttl/3)
			ok, err := hc.PExpire(hctx, key, ttl).Result()
			if err != nil || !ok {
				mu.Lock()
				lostAt = time.Now()
				mu.Unlock()
				return
			}
		}
	}()
	go func() { // waiter
		defer func() { done <- struct{}{} }()
		for hctx.Err() == nil {
			if ok, err := wc.SetNX(hctx, key, "waiter", ttl).Result(); err == nil && ok {
				mu.Lock()
				acquiredAt = time.Now()
				mu.Unlock()
				return
			}
			sleepCtx(hctx, 10*time.Millisecond)
		}
	}()
	sleepCtx(ctx, time.Second)
	cut := time.Now()
	px.Cut()
	<-done
	<-done
	mu.Lock()
	defer mu.Unlock()
	if acquiredAt.IsZero() {
		return fmt.Errorf("naive waiter never acquired")
	}
	var res string
	if lostAt.IsZero() {
		res = fmt.Sprintf("waiter acquired %s after the cut; the holder still worked 40 s later", ms(acquiredAt.Sub(cut)))
	} else {
		res = fmt.Sprintf("waiter acquired %s after the cut; the holder stopped %s after the cut (overlap %s)",
			ms(acquiredAt.Sub(cut)), ms(lostAt.Sub(cut)), ms(lostAt.Sub(acquiredAt)))
	}
	stopsFirst := !lostAt.IsZero() && lostAt.Before(acquiredAt)
	e.rep.add(lostSec, "naive Redis lock (SET NX PX 2000)", "holder cut off from Redis (black hole)", res, "stops before the successor?", yesno(stopsFirst))
	e.rep.note(lostSec, "The naive Redis lock is the benchmark's own implementation of the common pattern (go-redis defaults: 3 s read timeout, 3 retries; renew with PEXPIRE every TTL/3; stop when a renewal fails).")
	return nil
}

// electLostLease: etcdctl elect leader A, waiter B; A's lease is revoked.
// B wins at once; how long does A go on (it has no command: it goes on
// "leading" until it notices and exits)?
func (e *env) electLostLease(ctx context.Context) error {
	name := "bench-elect-revoke"
	pair, err := e.startElectPair(ctx, name)
	defer pair.close()
	if err != nil {
		return err
	}
	a, b := pair.a, pair.b
	lease, _, err := firstLease(ctx, e.etcd.etcd.cli, name+"/")
	if err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := e.etcd.etcd.cli.Revoke(ctx, lease); err != nil {
		return err
	}
	won, err := b.waitWon(ctx, 10*time.Second)
	if err != nil {
		return err
	}
	stoppedFirst := a.p.Exited()
	var res string
	if a.p.Wait(electTTL/3 + 10*time.Second) {
		res = fmt.Sprintf("successor won %s after the revoke; the old leader went on for %s more, then exited %d (\"session expired\")",
			ms(won.Sub(t0)), ms(time.Since(won)), a.p.ExitCode())
	} else {
		res = fmt.Sprintf("successor won %s after the revoke; the old leader was still running %s later", ms(won.Sub(t0)), ms(time.Since(won)))
	}
	e.rep.add(lostSec, "etcdctl elect (60 s session)", "lease revoked (etcdctl lease revoke)", res, "stops before the successor?", yesno(stoppedFirst))
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
