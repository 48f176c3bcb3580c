package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
)

const (
	scaleSec = "Store cost: per leader change vs. candidates"
	// A long renewal interval keeps periodic renewals out of the short
	// measurement windows (they are also measured and subtracted).
	scaleTTL     = 60 * time.Second
	scaleRenew   = 29 * time.Second
	scaleChanges = 10
)

var scaleNs = []int{1, 10, 100, 1000}

// scaleEnv holds the servers of the scaling phase, started early so that a
// Redis election's first-term hold-off (one TTL) has passed when it runs.
type scaleEnv struct {
	etcd     *etcdServer
	redis    *redisServer
	etcdCli  *clientv3.Client // reads the queues directly
	redisCli *goredis.Client
	// stores make the candidates, with the client options electd runs with.
	stores map[string]*store.Store
	pre    map[string]*series // redis series already holding candidate 1
}

var scaleState struct {
	mu sync.Mutex
	sc *scaleEnv
}

// prepareScale starts the scaling phase's own etcd and Redis, and the
// first candidate of each Redis election.
func (e *env) prepareScale(ctx context.Context) error {
	es, err := startEtcd(ctx, e.etcdBin, e.dir, "scale-etcd")
	if err != nil {
		return err
	}
	rs, err := startRedis(ctx, e.redisBin, e.dir, "scale-redis")
	if err != nil {
		return err
	}
	ecli, err := clientv3.New(clientv3.Config{Endpoints: []string{es.addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	rcli := goredis.NewClient(&goredis.Options{Addr: rs.addr, ContextTimeoutEnabled: true, PoolSize: 64})
	sc := &scaleEnv{etcd: es, redis: rs, etcdCli: ecli, redisCli: rcli, pre: map[string]*series{}, stores: map[string]*store.Store{}}
	for kind, url := range map[string]string{"etcd": "etcd://" + es.addr, "redis": "redis://" + rs.addr} {
		st, err := store.Open(ctx, store.Options{URL: url}, nil)
		if err != nil {
			return err
		}
		sc.stores[kind] = st
	}
	for _, view := range []bool{false, true} {
		s := sc.newSeries(ctx, "redis", view)
		if err := s.grow(1); err != nil {
			return err
		}
		sc.pre[s.election] = s
	}
	scaleState.mu.Lock()
	scaleState.sc = sc
	scaleState.mu.Unlock()
	return nil
}

// cand is one in-process candidate.
type cand struct {
	id     string
	el     elector.Locker
	resign chan struct{}
}

type winner struct {
	c  *cand
	at time.Time
}

// series is one election of in-process candidates.
type series struct {
	sc       *scaleEnv
	kind     string
	election string
	view     bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	won      chan winner
	errs     chan error
	cands    []*cand
}

func (sc *scaleEnv) newSeries(parent context.Context, kind string, view bool) *series {
	name := "scale-campaign"
	if view {
		name = "scale-view"
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &series{sc: sc, kind: kind, election: name, view: view, ctx: ctx, cancel: cancel,
		won: make(chan winner, 2048), errs: make(chan error, 2048)}
}

func (s *series) newElector(id string) (elector.Locker, error) {
	t := elector.Timing{TTL: scaleTTL, RenewInterval: scaleRenew}
	return s.sc.stores[s.kind].NewElector(elector.Candidate{Election: s.election, ID: id, Timing: t})
}

// grow adds candidates until there are n, each campaigning in a loop:
// win, wait to be told to resign, resign, campaign again at once.
func (s *series) grow(n int) error {
	for len(s.cands) < n {
		c := &cand{id: fmt.Sprintf("c%04d", len(s.cands)+1), resign: make(chan struct{}, 1)}
		el, err := s.newElector(c.id)
		if err != nil {
			return err
		}
		c.el = el
		s.cands = append(s.cands, c)
		if s.view {
			ch := el.Observe(s.ctx)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				for range ch {
				}
			}()
		}
		s.wg.Add(1)
		go s.loop(c)
	}
	return nil
}

func (s *series) loop(c *cand) {
	defer s.wg.Done()
	for s.ctx.Err() == nil {
		term, err := c.el.Campaign(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.errs <- fmt.Errorf("%s: campaign: %w", c.id, err)
			sleepCtx(s.ctx, 100*time.Millisecond)
			continue
		}
		s.won <- winner{c: c, at: time.Now()}
		select {
		case <-c.resign:
			rctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			if err := term.Resign(rctx); err != nil && s.ctx.Err() == nil {
				s.errs <- fmt.Errorf("%s: resign: %w", c.id, err)
			}
			cancel()
		case <-s.ctx.Done():
			return
		}
	}
}

func (s *series) queued(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s.kind == "etcd" {
		resp, err := s.sc.etcdCli.Get(ctx, "/electd/elections/"+s.election+"/", clientv3WithPrefixCount()...)
		if err != nil {
			return 0, err
		}
		return int(resp.Count), nil
	}
	n, err := s.sc.redisCli.ZCard(ctx, "electd:{"+s.election+"}:queue").Result()
	return int(n), err
}

func (s *series) wakeups() uint64 {
	var t uint64
	for _, c := range s.cands {
		t += c.el.Wakeups()
	}
	return t
}

func (s *series) close() {
	s.cancel()
	eachAtMost(64, s.cands, func(c *cand) { _ = c.el.Close() })
	s.wg.Wait()
}

func (s *series) counter() counter {
	if s.kind == "etcd" {
		return etcdCounter{s.sc.etcd}
	}
	return redisCounter{s.sc.redis}
}

// scale runs the series on both backends in parallel (separate servers),
// then the naive Redis lock.
func (e *env) scale(ctx context.Context) error {
	scaleState.mu.Lock()
	sc := scaleState.sc
	scaleState.mu.Unlock()
	if sc == nil {
		return errors.New("scale servers were not prepared")
	}
	defer func() {
		for _, st := range sc.stores {
			_ = st.Close()
		}
		_ = sc.etcdCli.Close()
		_ = sc.redisCli.Close()
	}()
	e.parallel(ctx,
		func(ctx context.Context) {
			for _, view := range []bool{false, true} {
				e.try(fmt.Sprintf("scale etcd view=%v", view), func() error { return e.runSeries(ctx, sc, "etcd", view) })
			}
		},
		func(ctx context.Context) {
			for _, view := range []bool{false, true} {
				e.try(fmt.Sprintf("scale redis view=%v", view), func() error { return e.runSeries(ctx, sc, "redis", view) })
			}
			e.try("naive redis cost", func() error { return e.naiveCost(ctx, sc) })
		},
	)
	e.rep.note(scaleSec, "In-process candidates using the elector packages (one client per backend), --ttl %s with renewals every %s so that periodic renewals stay out of the windows; %d leader changes per N, each: the leader resigns and at once campaigns again (joins the tail), the head of the queue is granted. Per change = (requests in the window − the idle rate measured just before × its length) / %d. etcd: started RPCs without LeaseKeepAlive (renewals); Redis: client commands (EVALSHA, PING, …), not those run inside scripts.",
		scaleTTL, scaleRenew, scaleChanges, scaleChanges)
	e.rep.note(scaleSec, "\"campaign only\": candidates that only campaign. \"+ leader view\": each candidate also keeps the watched leader view that every `electd run` keeps for /leader (Observe), as N electd processes would.")
	return nil
}

func (e *env) runSeries(ctx context.Context, sc *scaleEnv, kind string, view bool) error {
	s := sc.pre[map[bool]string{false: "scale-campaign", true: "scale-view"}[view]]
	if kind == "etcd" || s == nil {
		s = sc.newSeries(ctx, kind, view)
	}
	defer s.close()
	variant := "campaign only"
	if view {
		variant = "+ leader view"
	}
	cnt := s.counter()
	var cur *cand
	results := map[int]float64{}
	for _, n := range scaleNs {
		if err := s.grow(n); err != nil {
			return err
		}
		if err := waitUntil(ctx, scaleTTL+60*time.Second, func() bool {
			q, err := s.queued(ctx)
			return err == nil && q == n
		}); err != nil {
			return fmt.Errorf("%s %s: %d candidates not queued: %w", kind, variant, n, err)
		}
		if cur == nil {
			select {
			case w := <-s.won:
				cur = w.c
			case <-time.After(scaleTTL + 30*time.Second):
				return fmt.Errorf("%s %s: no leader", kind, variant)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := quiet(ctx, cnt, kind, n); err != nil {
			return fmt.Errorf("%s %s N=%d: %w", kind, variant, n, err)
		}
		i0, err := cnt.snap(ctx)
		if err != nil {
			return err
		}
		ti := time.Now()
		sleepCtx(ctx, 2*time.Second)
		i1, err := cnt.snap(ctx)
		if err != nil {
			return err
		}
		idleDur := time.Since(ti)
		c0, err := cnt.snap(ctx)
		if err != nil {
			return err
		}
		wk0 := s.wakeups()
		t0 := time.Now()
		var lat []time.Duration
		for range scaleChanges {
			sent := time.Now()
			cur.resign <- struct{}{}
			select {
			case w := <-s.won:
				if n > 1 && w.c == cur {
					return fmt.Errorf("%s %s N=%d: the resigned leader won again", kind, variant, n)
				}
				cur = w.c
				lat = append(lat, w.at.Sub(sent))
			case err := <-s.errs:
				return err
			case <-time.After(30 * time.Second):
				return fmt.Errorf("%s %s N=%d: no successor within 30s", kind, variant, n)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		sleepCtx(ctx, 100*time.Millisecond) // the last rejoin
		c1, err := cnt.snap(ctx)
		if err != nil {
			return err
		}
		chgDur := time.Since(t0)
		wk := s.wakeups() - wk0
		idle, chg := diffMap(i0, i1), diffMap(c0, c1)
		logf("scale %s %s N=%d: idle %s: %s; changes %s: %s", kind, variant, n, idleDur.Round(time.Millisecond), detail(idle, 1, nil), chgDur.Round(time.Millisecond), detail(chg, 1, nil))
		adj := map[string]float64{}
		for k, v := range chg {
			adj[k] = v
		}
		for k, v := range idle {
			adj[k] -= v * float64(chgDur) / float64(idleDur)
		}
		per := func(keep func(string) bool) float64 {
			return sumMap(adj, func(k string) bool { return !keep(k) }) / scaleChanges
		}
		subj := fmt.Sprintf("electd, %s, %s", kind, variant)
		var val string
		if kind == "etcd" {
			notKA := func(p string) func(string) bool {
				return func(k string) bool { return strings.HasPrefix(k, p) && !strings.HasSuffix(k, "/LeaseKeepAlive") }
			}
			r := per(notKA("rpc:"))
			results[n] = r
			val = fmt.Sprintf("%.1f RPCs (%.1f msgs in, %.1f msgs out)", r, per(notKA("msg:")), per(func(k string) bool { return strings.HasPrefix(k, "sent:") }))
		} else {
			r := per(func(k string) bool { return !scriptInner[k] })
			results[n] = r
			val = fmt.Sprintf("%.1f requests (%.1f commands inside scripts)", r, per(func(k string) bool { return scriptInner[k] && k != "info" }))
		}
		val += fmt.Sprintf("; %.1f wakeups; handover %s", float64(wk)/scaleChanges, summarize(lat).short())
		e.rep.add(scaleSec, subj, fmt.Sprintf("N = %d: per leader change", n), val, "", "")
		logf("scale %s %s N=%d: %s", kind, variant, n, val)
	}
	lo, hi := results[10], results[1000]
	ok := hi <= 1.5*lo+2
	e.rep.add(scaleSec, fmt.Sprintf("electd, %s, %s", kind, variant), "N = 1000 vs N = 10",
		fmt.Sprintf("%.1f vs %.1f", hi, lo), "independent of N", verdict(ok))
	return nil
}

// aperiodic counts what a delta holds beyond periodic renewals: etcd
// requests and messages but LeaseKeepAlive (and not calls ended, which
// repeat the calls started); Redis client requests.
func aperiodic(kind string, d map[string]float64) float64 {
	if kind == "etcd" {
		return sumMap(d, func(k string) bool {
			return strings.HasSuffix(k, "/LeaseKeepAlive") || strings.HasPrefix(k, "done:")
		})
	}
	return electdRequests(d)
}

// quiet waits (at most 30 s) until joining has settled: half a second with
// next to no requests beyond renewals.
func quiet(ctx context.Context, cnt counter, kind string, n int) error {
	limit := 1.0
	if kind == "redis" {
		limit = 3 + float64(n)/100 // renewals of earlier candidates
	}
	deadline := time.Now().Add(30 * time.Second)
	prev, err := cnt.snap(ctx)
	if err != nil {
		return err
	}
	for {
		sleepCtx(ctx, 500*time.Millisecond)
		cur, err := cnt.snap(ctx)
		if err != nil {
			return err
		}
		v := aperiodic(kind, diffMap(prev, cur))
		if v <= limit {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("still %.0f requests per 500 ms after 30 s", v)
		}
		prev = cur
	}
}

// naiveCost: the naive Redis lock's waiters, SET NX PX every 10 ms.
func (e *env) naiveCost(ctx context.Context, sc *scaleEnv) error {
	cli := goredis.NewClient(&goredis.Options{Addr: sc.redis.addr, PoolSize: 128})
	defer cli.Close()
	const ttl = 2 * time.Second
	for _, n := range []int{10, 100} {
		key := fmt.Sprintf("bench-naive-cost-%d", n)
		if ok, err := cli.SetNX(ctx, key, "holder", ttl).Result(); err != nil || !ok {
			return fmt.Errorf("naive holder: %v %v", ok, err)
		}
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the holder renews
			defer wg.Done()
			for wctx.Err() == nil {
				sleepCtx(wctx, ttl/3)
				cli.PExpire(wctx, key, ttl)
			}
		}()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for wctx.Err() == nil {
					cli.SetNX(wctx, key, fmt.Sprintf("w%d", i), ttl)
					sleepCtx(wctx, 10*time.Millisecond)
				}
			}()
		}
		sleepCtx(ctx, 500*time.Millisecond)
		s0, err := sc.redis.commandStats(ctx)
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		t0 := time.Now()
		sleepCtx(ctx, 3*time.Second)
		s1, err := sc.redis.commandStats(ctx)
		d := time.Since(t0)
		cancel()
		wg.Wait()
		if err != nil {
			return err
		}
		sets := (s1["set"] - s0["set"]) / float64(n) * float64(time.Minute) / float64(d)
		e.rep.add(costSec, "naive Redis lock", fmt.Sprintf("idle waiter (SET NX PX every 10 ms), requests/min, %d waiters", n),
			fmt.Sprintf("%.0f per waiter", sets), "", "")
	}
	return nil
}
