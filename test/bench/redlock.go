package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/store"
)

const redlockSec = "Redlock beside redsync"

const (
	// rlTTL is the lease of the latency and idle-cost figures: redsync's
	// default expiry (8 s), and electd's --ttl of the same length (its
	// renewals, and a waiter's steps, every TTL/5 = 1.6 s).
	rlTTL = 8 * time.Second
	// rlCutTTL is the lease of the cut-off trials: short, so that a trial
	// waits out little.
	rlCutTTL = 2 * time.Second
	// rlLearnCap bounds how long a cut-off redsync holder is given to
	// learn anything.
	rlLearnCap = 60 * time.Second
	// rlRedsync names the peer in the report.
	rlRedsync = "redsync v4.18.1"
	// rlElection and rlMutex are the lock of a–c.
	rlElection = "bench-redlock"
	rlMutex    = "bench-redsync"
)

// rlEnv is the redlock phase's three independent redis-server processes,
// shared by electd's redlock backend and redsync.
type rlEnv struct {
	srvs  []*redisServer
	addrs []string
}

func (r *rlEnv) url() string { return "redlock://" + strings.Join(r.addrs, ",") }

// redsyncClients are one redsync user's own clients, one per server, with
// go-redis's defaults (as `redis.NewClient(&redis.Options{Addr: a})` gives
// them), and the Redsync made on them.
type redsyncClients struct {
	clis []*goredis.Client
	rs   *redsync.Redsync
}

func newRedsync(addrs []string) *redsyncClients {
	c := &redsyncClients{}
	var pools []rsredis.Pool
	for _, a := range addrs {
		cli := goredis.NewClient(&goredis.Options{Addr: a})
		c.clis = append(c.clis, cli)
		pools = append(pools, rsgoredis.NewPool(cli))
	}
	c.rs = redsync.New(pools...)
	return c
}

func (c *redsyncClients) close() {
	for _, cli := range c.clis {
		_ = cli.Close()
	}
}

// redlockPhase runs electd's redlock backend (in-process electors through
// store.Open, as `electd` opens a redlock:// store) and redsync side by side
// on the same three redis-server processes: acquire latency on a free lock,
// release → next holder, the idle cost of a waiter, and what a holder cut
// off from every server does after another got the lock.
func (e *env) redlockPhase(ctx context.Context) error {
	started := time.Now()
	rl := &rlEnv{}
	defer func() {
		for _, s := range rl.srvs {
			s.close()
		}
	}()
	for i := range 3 {
		s, err := startRedis(ctx, e.redisBin, e.dir, fmt.Sprintf("redlock-%d", i+1))
		if err != nil {
			return err
		}
		rl.srvs = append(rl.srvs, s)
		rl.addrs = append(rl.addrs, s.addr)
	}
	logf("redlock: redis-server on %s", strings.Join(rl.addrs, ", "))
	goredis.SetLogger(redisLog{}) // go-redis's own lines when a proxy is cut

	// Two electd copies (each its own store: its own clients, as two
	// processes) on one election, and two redsync users on one mutex.
	st1, err := store.Open(ctx, store.Options{URL: rl.url()}, nil)
	if err != nil {
		return err
	}
	defer st1.Close()
	st2, err := store.Open(ctx, store.Options{URL: rl.url()}, nil)
	if err != nil {
		return err
	}
	defer st2.Close()
	timing := elector.Timing{TTL: rlTTL}
	el1, err := st1.NewElector(elector.Candidate{Election: rlElection, ID: "electd-1", Timing: timing})
	if err != nil {
		return err
	}
	defer el1.Close()
	el2, err := st2.NewElector(elector.Candidate{Election: rlElection, ID: "electd-2", Timing: timing})
	if err != nil {
		return err
	}
	defer el2.Close()
	rs1, rs2 := newRedsync(rl.addrs), newRedsync(rl.addrs)
	defer rs1.close()
	defer rs2.close()

	// d first, its trials in parallel (each on an election and a mutex of
	// its own, through proxies of its own), while electd's election of
	// a–c waits out its first TTL: a fresh election grants nothing for one
	// TTL (the epoch rule), so the first campaign is a warm-up, not timed.
	var cutErr error
	var cutReport func()
	cutDone := make(chan struct{})
	go func() {
		defer close(cutDone)
		cutReport, cutErr = e.rlCut(ctx, rl)
	}()
	t0 := time.Now()
	term, err := el1.Campaign(ctx)
	if err != nil {
		return fmt.Errorf("electd warm-up campaign: %w", err)
	}
	warm := time.Since(t0)
	if err := term.Resign(ctx); err != nil {
		return fmt.Errorf("electd warm-up resign: %w", err)
	}
	<-cutDone
	if cutErr != nil {
		e.rep.failed("redlock: cut-off holder", cutErr)
		logf("redlock: cut-off holder: %v", cutErr)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	e.rep.note(redlockSec, "electd: elector-level, in process (not an `electd lock` process): each copy is a store.Open(redlock://3 servers) of its own, as electd opens it (go-redis clients with ContextTimeoutEnabled, MaxRetries -1, DialTimeout 2 s), and Campaign / Term.Resign / Term.Done on it. %s: redsync.New over three go-redis v9 clients with go-redis's defaults (redsync/v4/redis/goredis/v9 pools), Mutex.Lock / Unlock / Extend. Both on the same three redis-server %s processes (no persistence, loopback), in the same run.", rlRedsync, redisVersion(ctx, rl.srvs[0]))
	e.rep.note(redlockSec, "Acquire, handover and idle cost at a lease of %s: redsync's default expiry, and electd --ttl %s (renewals, and a waiter's steps, every TTL/5 = %s). electd's first campaign on the fresh election took %s: a server grants nothing for one TTL after its election state began (the epoch rule), so it is a warm-up, not a sample.", rlTTL, rlTTL, rlTTL/5, ms(warm))
	e.rep.note(redlockSec, "%d CPUs, load average %s when this phase began (the machine is shared): every millisecond figure is noisy; the two tools ran interleaved (a) or one after the other (b, c) in the same minute, so compare them within this run rather than across runs.", runtime.NumCPU(), loadavg())
	e.try("redlock: acquire", func() error { return e.rlAcquire(ctx, st1, el1, rs1) })
	e.try("redlock: handover", func() error { return e.rlHandover(ctx, rl, el1, el2, rs1, rs2) })
	// The idle windows count every command on the servers: a–b's electors
	// (their subscriptions ping) are closed first, c makes its own.
	_ = el1.Close()
	_ = el2.Close()
	e.try("redlock: idle waiter", func() error { return e.rlIdle(ctx, rl, st1, st2, rs1, rs2) })
	if cutReport != nil {
		cutReport() // d's rows after a–c's
	}

	logf("redlock: phase took %s", time.Since(started).Round(time.Second))
	return nil
}

// redisVersion is the server's redis_version, for the notes.
func redisVersion(ctx context.Context, s *redisServer) string {
	info, err := s.cli.Info(ctx, "server").Result()
	if err != nil {
		return "(version unknown)"
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			return v
		}
	}
	return "(version unknown)"
}

// rlAcquire: a. acquire latency on a free lock, electd and redsync trials
// interleaved. electd is timed twice: Campaign on a warm Elector (its
// subscriptions live, as a running electd's are), and on a new Elector per
// acquire (which first subscribes to the servers' channel; about what an
// `electd lock` process does after dialling). Each trial releases before
// the next one.
func (e *env) rlAcquire(ctx context.Context, st *store.Store, el elector.Locker, rs *redsyncClients) error {
	n := e.cfg.redlockTrials
	var warm, fresh, red, resign, unlock []time.Duration
	var lastToken uint64
	for i := range n {
		// electd, warm.
		t0 := time.Now()
		term, err := el.Campaign(ctx)
		if err != nil {
			return fmt.Errorf("electd trial %d: %w", i+1, err)
		}
		warm = append(warm, time.Since(t0))
		if term.Token <= lastToken {
			e.rep.violation("redlock: electd token %d after %d", term.Token, lastToken)
		}
		lastToken = term.Token
		t1 := time.Now()
		if err := term.Resign(ctx); err != nil {
			return fmt.Errorf("electd trial %d: resign: %w", i+1, err)
		}
		resign = append(resign, time.Since(t1))
		sleepCtx(ctx, 10*time.Millisecond)

		// electd, a new Elector.
		nel, err := st.NewElector(elector.Candidate{Election: rlElection, ID: "electd-new", Timing: elector.Timing{TTL: rlTTL}})
		if err != nil {
			return err
		}
		t0 = time.Now()
		term, err = nel.Campaign(ctx)
		if err != nil {
			_ = nel.Close()
			return fmt.Errorf("electd (new Elector) trial %d: %w", i+1, err)
		}
		fresh = append(fresh, time.Since(t0))
		lastToken = max(lastToken, term.Token)
		_ = term.Resign(ctx)
		_ = nel.Close()
		sleepCtx(ctx, 10*time.Millisecond)

		// redsync.
		m := rs.rs.NewMutex(rlMutex, redsync.WithExpiry(rlTTL))
		t0 = time.Now()
		if err := m.LockContext(ctx); err != nil {
			return fmt.Errorf("redsync trial %d: %w", i+1, err)
		}
		red = append(red, time.Since(t0))
		t1 = time.Now()
		if ok, err := m.UnlockContext(ctx); !ok || err != nil {
			return fmt.Errorf("redsync trial %d: unlock: %v %v", i+1, ok, err)
		}
		unlock = append(unlock, time.Since(t1))
		sleepCtx(ctx, 10*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	fig := "a. acquire, free lock (call → holding)"
	e.rep.add(redlockSec, "electd, redlock, Campaign (warm Elector)", fig, summarize(warm).String(), "", "")
	e.rep.add(redlockSec, "electd, redlock, Campaign (new Elector per acquire)", fig, summarize(fresh).String(), "", "")
	e.rep.add(redlockSec, rlRedsync+", Mutex.Lock", fig, summarize(red).String(), "", "")
	e.rep.add(redlockSec, "electd, redlock, Term.Resign", "a. release call, free lock", summarize(resign).String(), "", "")
	e.rep.add(redlockSec, rlRedsync+", Mutex.Unlock", "a. release call, free lock", summarize(unlock).String(), "", "")
	logf("redlock a: electd warm %s, new Elector %s, redsync %s", summarize(warm).short(), summarize(fresh).short(), summarize(red).short())
	return nil
}

// rlHandover: b. release → next holder. A waiter waits; after a random
// 200–500 ms the holder releases; the time is from the release call to the
// waiter's acquire returning. The two copies swap roles every trial.
func (e *env) rlHandover(ctx context.Context, rl *rlEnv, el1, el2 elector.Locker, rs1, rs2 *redsyncClients) error {
	n := e.cfg.trials
	type won struct {
		term *elector.Term
		at   time.Time
		err  error
	}
	pause := func() time.Duration { return 200*time.Millisecond + rand.N(300*time.Millisecond) }

	// electd.
	var ed, eResign []time.Duration
	holder, waiter := el1, el2
	term, err := holder.Campaign(ctx)
	if err != nil {
		return err
	}
	for i := range n {
		wonC := make(chan won, 1)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		go func() {
			t, err := waiter.Campaign(wctx)
			wonC <- won{t, time.Now(), err}
		}()
		if err := rl.waitQueued(ctx, rlElection, 2); err != nil {
			cancel()
			return fmt.Errorf("electd trial %d: %w", i+1, err)
		}
		sleepCtx(ctx, pause())
		t0 := time.Now()
		if err := term.Resign(ctx); err != nil {
			cancel()
			return fmt.Errorf("electd trial %d: resign: %w", i+1, err)
		}
		eResign = append(eResign, time.Since(t0))
		w := <-wonC
		cancel()
		if w.err != nil {
			return fmt.Errorf("electd trial %d: waiter: %w", i+1, w.err)
		}
		ed = append(ed, w.at.Sub(t0))
		if w.term.Token <= term.Token {
			e.rep.violation("redlock: electd handover token %d after %d", w.term.Token, term.Token)
		}
		term, holder, waiter = w.term, waiter, holder
	}
	_ = term.Resign(ctx)

	// redsync: the waiter with its default retry policy.
	var rd []time.Duration
	hold := rs1.rs.NewMutex(rlMutex, redsync.WithExpiry(rlTTL))
	if err := hold.LockContext(ctx); err != nil {
		return err
	}
	users := [2]*redsyncClients{rs1, rs2}
	for i := range n {
		wm := users[(i+1)%2].rs.NewMutex(rlMutex, redsync.WithExpiry(rlTTL))
		type got struct {
			at  time.Time
			err error
		}
		gotC := make(chan got, 1)
		go func() {
			err := wm.LockContext(ctx)
			gotC <- got{time.Now(), err}
		}()
		sleepCtx(ctx, pause())
		t0 := time.Now()
		if ok, err := hold.UnlockContext(ctx); !ok || err != nil {
			return fmt.Errorf("redsync trial %d: unlock: %v %v", i+1, ok, err)
		}
		g := <-gotC
		if g.err != nil {
			return fmt.Errorf("redsync trial %d: waiter: %w (its 32 tries ran out?)", i+1, g.err)
		}
		rd = append(rd, g.at.Sub(t0))
		hold = wm
	}
	_, _ = hold.UnlockContext(ctx)

	fig := "b. release → waiter holds"
	e.rep.add(redlockSec, "electd, redlock, Term.Resign → waiter's Campaign returns", fig, summarize(ed).String(), "", "")
	e.rep.add(redlockSec, rlRedsync+", Unlock → waiter's Lock returns (32 tries, 50–250 ms delay: the defaults)", fig, summarize(rd).String(), "", "")
	e.rep.note(redlockSec, "b: one waiter, queued (electd: its entry on all three servers) or retrying (redsync) before the release; the holder releases 200–500 ms (random) after the waiter started; the two copies swap roles every trial. electd's Term.Resign call itself took %s (it hands the term to the next in line on every server, which publishes it). redsync's waiter has no wake-up: it finds the lock free at its next try, 50–250 ms (uniform) after its last.", summarize(eResign).short())
	logf("redlock b: electd %s, redsync %s", summarize(ed).short(), summarize(rd).short())
	return nil
}

// waitQueued waits until every server's queue of the election holds n
// entries.
func (rl *rlEnv) waitQueued(ctx context.Context, election string, n int) error {
	key := "electd:{" + election + "}:rl:queue"
	return waitUntil(ctx, 10*time.Second, func() bool {
		for _, s := range rl.srvs {
			c, err := s.cli.ZCard(ctx, key).Result()
			if err != nil || int(c) != n {
				return false
			}
		}
		return true
	})
}

// redsyncInner are the commands redsync's scripts run inside Redis, and
// INFO (the benchmark's own): everything else is a client request.
var redsyncInner = map[string]bool{"get": true, "del": true, "pexpire": true, "info": true}

// rlIdle: c. requests a minute of an idle waiter while another holds. Per
// tool: the holder alone for a baseline window, then the holder and one
// waiter; the waiter's rate is the difference, per server, from INFO
// commandstats of each server.
func (e *env) rlIdle(ctx context.Context, rl *rlEnv, st1, st2 *store.Store, rs1, rs2 *redsyncClients) error {
	win, base := e.cfg.redlockWindow, e.cfg.redlockWindow/2
	const settle = 2 * time.Second

	// electd: a holder and a waiter, each on a store of its own, closed
	// before redsync's windows.
	timing := elector.Timing{TTL: rlTTL}
	el1, err := st1.NewElector(elector.Candidate{Election: rlElection, ID: "electd-holder", Timing: timing})
	if err != nil {
		return err
	}
	defer el1.Close()
	el2, err := st2.NewElector(elector.Candidate{Election: rlElection, ID: "electd-waiter", Timing: timing})
	if err != nil {
		return err
	}
	defer el2.Close()
	term, err := el1.Campaign(ctx)
	if err != nil {
		return err
	}
	// The windows last whole renewal intervals and start half an interval
	// off the holder's renewals (and the waiter's steps: settle is 1.25
	// intervals), so that no periodic request falls on a window's edge.
	sleepCtx(ctx, rlTTL/5/2)
	eBase, eBaseDur, err := rl.window(ctx, base)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() {
		_, err := el2.Campaign(wctx)
		wdone <- err
	}()
	if err := rl.waitQueued(ctx, rlElection, 2); err != nil {
		cancel()
		return err
	}
	sleepCtx(ctx, settle)
	eWin, eWinDur, err := rl.window(ctx, win)
	cancel()
	<-wdone
	_ = term.Resign(ctx)
	_ = el1.Close()
	_ = el2.Close()
	if err != nil {
		return err
	}

	// redsync: the holder extends every expiry/3, the waiter tries with
	// the default delays and a try budget that outlasts the window.
	hctx, hcancel := context.WithCancel(ctx)
	hold := rs1.rs.NewMutex(rlMutex, redsync.WithExpiry(rlTTL))
	if err := hold.LockContext(ctx); err != nil {
		hcancel()
		return err
	}
	// One extend now: its script's first use on each server (NOSCRIPT,
	// then EVAL) stays out of the windows.
	if ok, err := hold.ExtendContext(ctx); !ok || err != nil {
		hcancel()
		return fmt.Errorf("redsync holder's first extend: %v %v", ok, err)
	}
	hdone := make(chan struct{})
	go func() {
		defer close(hdone)
		t := time.NewTicker(rlTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
				if ok, err := hold.ExtendContext(hctx); !ok || err != nil {
					if hctx.Err() == nil {
						logf("redlock c: redsync holder's extend failed: %v %v", ok, err)
					}
					return
				}
			}
		}
	}()
	sleepCtx(ctx, rlTTL/3/2) // off the holder's extends, as for electd
	stopHolder := func() {
		hcancel()
		<-hdone
		_, _ = hold.UnlockContext(context.WithoutCancel(ctx))
	}
	rBase, rBaseDur, err := rl.window(ctx, base)
	if err != nil {
		stopHolder()
		return err
	}
	wctx, cancel = context.WithCancel(ctx)
	go func() {
		m := rs2.rs.NewMutex(rlMutex, redsync.WithExpiry(rlTTL), redsync.WithTries(math.MaxInt32))
		err := m.LockContext(wctx)
		if err == nil {
			err = errors.New("the redsync waiter got the lock while the holder held it")
		} else if wctx.Err() != nil {
			err = nil
		}
		wdone <- err
	}()
	sleepCtx(ctx, settle)
	rWin, rWinDur, err := rl.window(ctx, win)
	cancel()
	werr := <-wdone
	stopHolder()
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}

	// report also names any request that is not one a client of that tool
	// sends while idle: most likely a command a script now runs inside
	// Redis that the inner list does not know yet (counted as a request).
	report := func(subj string, baseD, winD []map[string]float64, baseDur, winDur time.Duration, inner func(string) bool, client map[string]bool) (float64, string) {
		var per []string
		tot := 0.0
		byCmd := map[string]float64{}
		innerTot := 0.0
		for i := range rl.srvs {
			r := 0.0
			for _, k := range keys(baseD[i], winD[i]) {
				v := (winD[i][k]/winDur.Minutes() - baseD[i][k]/baseDur.Minutes())
				if inner(k) {
					if k != "info" {
						innerTot += v
					}
					continue
				}
				r += v
				byCmd[k] += v / float64(len(rl.srvs))
			}
			tot += r
			per = append(per, fmt.Sprintf("%.1f", r))
		}
		val := fmt.Sprintf("%s a minute on the three servers (%s; + %.1f commands inside scripts per server)",
			strings.Join(per, " / "), detail(byCmd, 1, func(k string) bool { return math.Abs(byCmd[k]) >= 0.05 }), innerTot/float64(len(rl.srvs)))
		e.rep.add(redlockSec, subj, "c. idle waiter while another holds: requests a minute, per server", val, "", "")
		var odd []string
		for _, k := range keys(byCmd) {
			if !client[k] && math.Abs(byCmd[k]) >= 0.05 {
				odd = append(odd, k)
			}
		}
		if len(odd) > 0 {
			e.rep.note(redlockSec, "c, %s: counted as requests, though not what its client sends while idle: %s — if a script now runs it inside Redis, add it to the inner commands (test/bench: scriptInner, redsyncInner).", subj, strings.Join(odd, ", "))
		}
		return tot / float64(len(rl.srvs)), val
	}
	for i, s := range rl.srvs {
		logf("redlock c %s: electd baseline %s: %s; window %s: %s", s.addr, eBaseDur.Round(time.Millisecond), allCalls(eBase[i]), eWinDur.Round(time.Millisecond), allCalls(eWin[i]))
		logf("redlock c %s: redsync baseline %s: %s; window %s: %s", s.addr, rBaseDur.Round(time.Millisecond), allCalls(rBase[i]), rWinDur.Round(time.Millisecond), allCalls(rWin[i]))
	}
	ePer, eVal := report("electd, redlock, waiter (Campaign)", eBase, eWin, eBaseDur, eWinDur, func(k string) bool { return scriptInner[k] },
		map[string]bool{"evalsha": true, "eval": true, "ping": true})
	rPer, rVal := report(rlRedsync+", waiter (Lock, default delays, unbounded tries)", rBase, rWin, rBaseDur, rWinDur, func(k string) bool { return redsyncInner[k] },
		map[string]bool{"evalsha": true, "eval": true, "set": true})
	logf("redlock c: electd waiter %s; redsync waiter %s", eVal, rVal)
	e.rep.note(redlockSec, "c: per tool, the holder alone for %s (baseline), then the holder and one waiter (after %s to settle) for %s; the waiter's rate is (window − baseline) per minute on each server, from INFO commandstats: client requests (electd: all but the commands its scripts run inside Redis; redsync: all but GET, DEL and PEXPIRE, which its scripts run) and, apart, the commands run inside scripts. The electd holder renews every %s and the redsync holder extends every expiry/3 = %s, both counted in the baseline. The electd waiter steps on every server once per renewal interval (its lease in the queue) and pings its silent subscription once per TTL; each redsync try is a SET NX on every server and, as it failed, a release script on every server. electd's waiter costs %.1f requests a minute per server, redsync's %.1f (%.0f×). Windows of this length hold few electd steps: ±1 step per server is ±%.0f %%.",
		base.Round(time.Second), settle, win.Round(time.Second), rlTTL/5, (rlTTL / 3).Round(time.Millisecond), ePer, rPer, rPer/math.Max(ePer, 0.1), 100*float64(rlTTL/5)/float64(win))
	return nil
}

// allCalls lists a commandstats delta, every command, by name.
func allCalls(d map[string]float64) string {
	var parts []string
	for _, k := range keys(d) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, d[k]))
	}
	return strings.Join(parts, ", ")
}

func keys(ms ...map[string]float64) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// window returns each server's commandstats delta over about d, and its
// length (from the first snapshot to the last).
func (rl *rlEnv) window(ctx context.Context, d time.Duration) ([]map[string]float64, time.Duration, error) {
	snap := func() ([]map[string]float64, error) {
		out := make([]map[string]float64, len(rl.srvs))
		for i, s := range rl.srvs {
			m, err := s.commandStats(ctx)
			if err != nil {
				return nil, err
			}
			out[i] = m
		}
		return out, nil
	}
	a, err := snap()
	if err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	sleepCtx(ctx, d)
	b, err := snap()
	if err != nil {
		return nil, 0, err
	}
	dur := time.Since(t0)
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	out := make([]map[string]float64, len(a))
	for i := range a {
		out[i] = diffMap(a[i], b[i])
	}
	return out, dur, nil
}

// proxies are one holder's fault proxies, one per server.
type proxies []*faultproxy.Proxy

func newProxies(addrs []string) (proxies, error) {
	var ps proxies
	for _, a := range addrs {
		p, err := faultproxy.New(a)
		if err != nil {
			ps.close()
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func (ps proxies) addrs() []string {
	var a []string
	for _, p := range ps {
		a = append(a, p.Addr())
	}
	return a
}

func (ps proxies) cut() {
	for _, p := range ps {
		p.Cut()
	}
}

func (ps proxies) close() {
	for _, p := range ps {
		_ = p.Close()
	}
}

// rlCut: d. a holder cut off from every server (a fault proxy per server
// between it and the servers, all cut at once) while another waits. The
// trials run in parallel, each on an election and a mutex of its own.
func (e *env) rlCut(ctx context.Context, rl *rlEnv) (func(), error) {
	n := e.cfg.redlockCutTrials
	col := newCollector()
	var mu sync.Mutex
	never := 0
	whys := map[string]int{} // what the cut-off redsync holders' Extend returned
	err := groups(2*n, func(g int) error {
		if g%2 == 0 {
			return e.rlCutElectd(ctx, rl, g/2, col)
		}
		learned, why, err := e.rlCutRedsync(ctx, rl, g/2, col)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && !learned {
			never++
		}
		if why != "" {
			whys[why]++
		}
		return err
	})
	return func() {
		ed, edCut, edGrant := summarize(col.get("electd gap")), summarize(col.get("electd done")), summarize(col.get("electd grant"))
		e.rep.add(redlockSec, "electd, redlock, cut-off holder: Term.Done − the other's grant", "d. cut-off holder keeps running after the other holds (negative: stopped before)",
			ed.String(), "< 0", verdict(ed.n > 0 && ed.max < 0))
		rLearn, rUntil := summarize(col.get("redsync learn")), summarize(col.get("redsync until"))
		val := rLearn.String()
		if never > 0 {
			val += fmt.Sprintf("; %d of %d did not learn within %s", never, n, rlLearnCap)
		}
		e.rep.add(redlockSec, rlRedsync+", cut-off holder: its first failed Extend − the other's Lock", "d. cut-off holder keeps running after the other holds (negative: stopped before)",
			val, "", "its code never stops on its own")
		e.rep.add(redlockSec, rlRedsync+", cut-off holder: its own Mutex.Until() − the other's Lock", "d. (had its code checked Until(): nothing in redsync does)",
			rUntil.String(), "", "")
		rOther, rFromCut := summarize(col.get("redsync other")), summarize(col.get("redsync learn from cut"))
		e.rep.note(redlockSec, "d: --ttl %s / expiry %s; %d trials per tool, in parallel, each on an election or mutex of its own, each holder dialling every server through a fault proxy of its own (internal/faultproxy), all three Cut() at once 100–500 ms (random) after the other copy began waiting (electd: queued on every server; redsync: calling Lock in a loop). electd: from the cut, the holder's Term.Done closed after %s and the other copy held after %s (median / p99); the stop is the term's own deadline, at elector level (`electd run` and `electd lock` stop the child a stop-timeout plus a margin before it). redsync: the holder runs the auto-extend loop users write (Extend every expiry/3 = %s, on go-redis's default client options); from the cut, the other user held after %s and the holder's Extend returned failure after %s. Extend returned: %s. redsync never stops the holder's protected code: it runs on until the holder's own loop sees Extend fail and stops it (the moment measured here), and without such a loop it runs on for ever. %s",
			rlCutTTL, rlCutTTL, n, edCut.short(), edGrant.short(), (rlCutTTL / 3).Round(time.Millisecond), rOther.short(), rFromCut.short(), countsOf(whys), untilNote(rUntil))
		logf("redlock d: electd Done − grant %s; redsync learn − acquire %s (never: %d), until − acquire %s", ed.short(), rLearn.short(), never, rUntil.short())
	}, err
}

func countsOf(m map[string]int) string {
	var parts []string
	for _, k := range keys(toFloat(m)) {
		parts = append(parts, fmt.Sprintf("%q ×%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "nothing (no trial learned)"
	}
	return strings.Join(parts, ", ")
}

func toFloat(m map[string]int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = float64(v)
	}
	return out
}

// untilNote says where the cut-off redsync holders' own deadline fell.
func untilNote(d dist) string {
	switch {
	case d.n == 0:
		return ""
	case d.max < 0:
		return "Its Mutex.Until() (a local deadline redsync computes and only reports) had passed before the other got the lock in every trial; nothing in redsync acts on it."
	default:
		return fmt.Sprintf("Its Mutex.Until() (a local deadline redsync computes and only reports) was as late as %s after the other got the lock; nothing in redsync acts on it.", ms(d.max))
	}
}

func (e *env) rlCutElectd(ctx context.Context, rl *rlEnv, i int, col *collector) error {
	name := fmt.Sprintf("bench-redlock-cut-%d", i+1)
	ps, err := newProxies(rl.addrs)
	if err != nil {
		return err
	}
	defer ps.close()
	timing := elector.Timing{TTL: rlCutTTL}
	hst, err := store.Open(ctx, store.Options{URL: "redlock://" + strings.Join(ps.addrs(), ",")}, nil)
	if err != nil {
		return err
	}
	defer hst.Close()
	wst, err := store.Open(ctx, store.Options{URL: rl.url()}, nil)
	if err != nil {
		return err
	}
	defer wst.Close()
	hel, err := hst.NewElector(elector.Candidate{Election: name, ID: "holder", Timing: timing})
	if err != nil {
		return err
	}
	defer hel.Close()
	wel, err := wst.NewElector(elector.Candidate{Election: name, ID: "other", Timing: timing})
	if err != nil {
		return err
	}
	defer wel.Close()
	term, err := hel.Campaign(ctx) // the election's first term: one TTL
	if err != nil {
		return fmt.Errorf("electd cut trial %d: holder: %w", i+1, err)
	}
	type won struct {
		term *elector.Term
		at   time.Time
		err  error
	}
	wonC := make(chan won, 1)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		t, err := wel.Campaign(wctx)
		wonC <- won{t, time.Now(), err}
	}()
	if err := rl.waitQueued(ctx, name, 2); err != nil {
		return fmt.Errorf("electd cut trial %d: %w", i+1, err)
	}
	sleepCtx(ctx, 100*time.Millisecond+rand.N(400*time.Millisecond))
	cutAt := time.Now()
	ps.cut()
	var doneAt time.Time
	select {
	case <-term.Done():
		doneAt = time.Now()
	case <-time.After(3 * rlCutTTL):
		return fmt.Errorf("electd cut trial %d: Term.Done did not close within %s of the cut", i+1, 3*rlCutTTL)
	case <-ctx.Done():
		return ctx.Err()
	}
	w := <-wonC
	if w.err != nil {
		return fmt.Errorf("electd cut trial %d: the other copy: %w", i+1, w.err)
	}
	defer func() { _ = w.term.Resign(context.WithoutCancel(ctx)) }()
	gap := doneAt.Sub(w.at)
	col.add("electd gap", gap)
	col.add("electd done", doneAt.Sub(cutAt))
	col.add("electd grant", w.at.Sub(cutAt))
	if gap >= 0 {
		e.rep.violation("redlock: cut-off electd holder's Term.Done closed %s after the other copy held (trial %d)", ms(gap), i+1)
	}
	if w.term.Token <= term.Token {
		e.rep.violation("redlock: the other copy's token %d is not above the cut-off holder's %d", w.term.Token, term.Token)
	}
	logf("redlock d electd %d: cut → Done %s, → other holds %s (Done − grant %s; tokens %d → %d)", i+1, ms(doneAt.Sub(cutAt)), ms(w.at.Sub(cutAt)), ms(gap), term.Token, w.term.Token)
	return nil
}

// rlCutRedsync reports false if the holder learned nothing within
// rlLearnCap, and what its failed Extend returned.
func (e *env) rlCutRedsync(ctx context.Context, rl *rlEnv, i int, col *collector) (bool, string, error) {
	name := fmt.Sprintf("bench-redsync-cut-%d", i+1)
	ps, err := newProxies(rl.addrs)
	if err != nil {
		return false, "", err
	}
	defer ps.close()
	hc, wc := newRedsync(ps.addrs()), newRedsync(rl.addrs)
	defer hc.close()
	defer wc.close()
	hold := hc.rs.NewMutex(name, redsync.WithExpiry(rlCutTTL))
	if err := hold.LockContext(ctx); err != nil {
		return false, "", fmt.Errorf("redsync cut trial %d: holder: %w", i+1, err)
	}
	// The holder's auto-extend loop, as users write it: every expiry/3,
	// and on failure stop the protected work.
	type learned struct {
		at    time.Time
		until time.Time
		ok    bool
		err   error
	}
	learnC := make(chan learned, 1)
	go func() {
		t := time.NewTicker(rlCutTTL / 3)
		defer t.Stop()
		for range t.C {
			ok, err := hold.Extend()
			if !ok || err != nil {
				learnC <- learned{time.Now(), hold.Until(), ok, err}
				return
			}
		}
	}()
	type got struct {
		at  time.Time
		err error
	}
	gotC := make(chan got, 1)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	other := wc.rs.NewMutex(name, redsync.WithExpiry(rlCutTTL))
	go func() {
		for {
			err := other.LockContext(wctx)
			if err == nil || wctx.Err() != nil {
				gotC <- got{time.Now(), err}
				return
			}
		}
	}()
	sleepCtx(ctx, 100*time.Millisecond+rand.N(400*time.Millisecond))
	cutAt := time.Now()
	ps.cut()
	g := <-gotC
	if g.err != nil {
		return false, "", fmt.Errorf("redsync cut trial %d: the other user: %w", i+1, g.err)
	}
	defer func() { _, _ = other.UnlockContext(context.WithoutCancel(ctx)) }()
	var l learned
	select {
	case l = <-learnC:
	case <-time.After(rlLearnCap - time.Since(cutAt)):
		logf("redlock d redsync %d: the cut-off holder learned nothing within %s of the cut", i+1, rlLearnCap)
		return false, "", nil
	case <-ctx.Done():
		return false, "", ctx.Err()
	}
	col.add("redsync learn", l.at.Sub(g.at))
	col.add("redsync until", l.until.Sub(g.at))
	col.add("redsync other", g.at.Sub(cutAt))
	col.add("redsync learn from cut", l.at.Sub(cutAt))
	logf("redlock d redsync %d: cut → other holds %s, → holder's Extend failed %s (%v, %v); its Until() − other's Lock %s",
		i+1, ms(g.at.Sub(cutAt)), ms(l.at.Sub(cutAt)), l.ok, l.err, ms(l.until.Sub(g.at)))
	return true, extendFailure(l.ok, l.err), nil
}

// extendFailure describes a failed Extend: its errors, without the node
// numbers, deduplicated.
func extendFailure(ok bool, err error) string {
	if err == nil {
		return fmt.Sprintf("ok=%v, no error", ok)
	}
	seen := map[string]bool{}
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if _, rest, found := strings.Cut(l, ": "); found && strings.HasPrefix(l, "node #") {
			l = rest
		}
		if !seen[l] {
			seen[l] = true
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}
