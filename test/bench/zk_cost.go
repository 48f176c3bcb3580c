package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/electd/electd/elector"
	ebackend "github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/backend/hosts"
	"github.com/electd/electd/elector/zk"
)

// zkRate is a delta of zkCounter counts per minute over dur.
type zkRate struct {
	m   map[string]float64
	dur time.Duration
}

// zkWindow sleeps d and returns the counts a minute over it.
func zkWindow(ctx context.Context, cnt *zkCounter, d time.Duration) (zkRate, error) {
	a, t0 := cnt.snap(), time.Now()
	sleepCtx(ctx, d)
	if err := ctx.Err(); err != nil {
		return zkRate{}, err
	}
	b, t1 := cnt.snap(), time.Now()
	return zkRateOf(a, b, t1.Sub(t0)), nil
}

func zkRateOf(a, b map[string]float64, d time.Duration) zkRate {
	r := zkRate{m: map[string]float64{}, dur: d}
	for k, v := range diffMap(a, b) {
		r.m[k] = v / d.Minutes()
	}
	return r
}

// minus is r − base, scaled by 1/n.
func (r zkRate) minus(base zkRate, n float64) map[string]float64 {
	out := map[string]float64{}
	for _, k := range keys(r.m, base.m) {
		out[k] = (r.m[k] - base.m[k]) / n
	}
	return out
}

// zkIdle: an idle follower's requests a minute, at a counting proxy in
// front of the server (zkCounter): per tool, a leader alone for a window
// (the baseline), then the leader and zkIdleN followers; a follower's
// rate is the difference over zkIdleN. electd: `electd run --ttl 4s --
// sleep` processes; the textbook recipe: in-process plainLocks with 4 s
// sessions.
func (e *env) zkIdle(ctx context.Context, b *backend) error {
	cnt, err := newZKCounter(b.zk.srv.Addr())
	if err != nil {
		return err
	}
	defer func() {
		if err := cnt.close(); err != nil {
			logf("zk idle: %v", err)
		}
	}()
	win := roundUp(e.cfg.idleWindow/2, zkLongTTL)
	const settle = 3 * time.Second
	var edBase, edWith, plBase, plWith zkRate

	err = func() error {
		const election = "zk-idle"
		start := func(id string) (*node, error) {
			return e.startNode(ctx, nodeSpec{election: election, id: id, store: "zk://" + cnt.Addr(), dir: e.dir, ttl: zkLongTTL,
				command: []string{e.sleepBin, "86400"}})
		}
		var err error
		edBase, edWith, err = idleElectd(ctx, b, election, zkIdleN, settle, start, func() (zkRate, error) { return zkWindow(ctx, cnt, win) })
		return err
	}()
	if err != nil {
		return fmt.Errorf("electd: %w", err)
	}

	err = func() error {
		addrs := []string{cnt.Addr()}
		lead, err := startPlain(addrs, "idle", "leader", zkLongTTL)
		if err != nil {
			return err
		}
		defer lead.close()
		if err := waitUntil(ctx, 10*time.Second, func() bool { s, _, _, _ := lead.times(); return !s.IsZero() }); err != nil {
			return fmt.Errorf("plain idle leader did not hold: %w", err)
		}
		sleepCtx(ctx, settle)
		if plBase, err = zkWindow(ctx, cnt, win); err != nil {
			return err
		}
		for i := range zkIdleN {
			f, err := startPlain(addrs, "idle", fmt.Sprintf("follower%d", i+1), zkLongTTL)
			if err != nil {
				return err
			}
			defer f.close()
		}
		sleepCtx(ctx, settle)
		plWith, err = zkWindow(ctx, cnt, win)
		return err
	}()
	if err != nil {
		return fmt.Errorf("plain recipe: %w", err)
	}

	n := float64(zkIdleN)
	edPer, plPer := edWith.minus(edBase, n), plWith.minus(plBase, n)
	edReq, plReq := zkRequests(edPer), zkRequests(plPer)
	fig := fmt.Sprintf("idle follower (%d followers, one leader): requests a minute at the server, each", zkIdleN)
	e.rep.add(zkSec, fmt.Sprintf("electd, zk, --ttl %s", zkLongTTL), fig,
		fmt.Sprintf("%s (%s); %s watch events", num(edReq, 1), zkByOp(edPer, 1), num(edPer[zkNotify], 1)), "", "")
	e.rep.add(zkSec, fmt.Sprintf("textbook recipe (go-zookeeper), session %s", zkLongTTL), fig,
		fmt.Sprintf("%s (%s); %s watch events", num(plReq, 1), zkByOp(plPer, 1), num(plPer[zkNotify], 1)), "(peer)", "")
	e.rep.note(zkSec, "idle: per tool, the leader alone for %s (baseline), then the leader and %d followers (after %s to settle) for %s; a follower's rate is (window − baseline) / %d. Requests are counted at a proxy in front of the server that reads the client protocol's frames (test/bench/zk_count.go): handshakes (\"connect\"), requests by op code (a ping is go-zookeeper's keep-alive, sent every third of the negotiated timeout whatever else the connection carries), and the watch notifications the server sent. The leaders alone, a minute: electd %s; the recipe %s.",
		win, zkIdleN, settle, win, zkIdleN, zkByOp(edBase.m, 1), zkByOp(plBase.m, 1))
	logf("zk idle: electd follower %.1f/min (%s), plain follower %.1f/min (%s)", edReq, zkByOp(edPer, 1), plReq, zkByOp(plPer, 1))
	return nil
}

// addLocker adds an in-process candidate on any backend's elector: it
// campaigns, leads until told to resign, resigns and campaigns again.
func (s *changeSeries) addLocker(c *cand, el elector.Locker, closer func()) {
	c.el = el
	s.cands = append(s.cands, c)
	s.closeF = append(s.closeF, closer)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for s.ctx.Err() == nil {
			term, err := el.Campaign(s.ctx)
			if err != nil {
				if s.ctx.Err() != nil {
					return
				}
				s.errs <- fmt.Errorf("%s: campaign: %w", c.id, err)
				sleepCtx(s.ctx, 100*time.Millisecond)
				continue
			}
			s.setLeader(c.id)
			s.won <- winner{c: c, at: time.Now()}
			select {
			case <-c.resign:
				rctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
				if err := term.Resign(rctx); err != nil && s.ctx.Err() == nil {
					s.errs <- fmt.Errorf("%s: resign: %w", c.id, err)
				}
				cancel()
			case <-term.Done():
				if s.ctx.Err() == nil {
					s.errs <- fmt.Errorf("%s: term lost: %v", c.id, term.Err())
				}
			case <-s.ctx.Done():
				return
			}
		}
	}()
}

// zkChanges: requests per leader change with N candidates, in process:
// electd's electors (elector/zk, each with its session, as electd
// processes have), through the counting proxy.
func (e *env) zkChanges(ctx context.Context, b *backend) error {
	cnt, err := newZKCounter(b.zk.srv.Addr())
	if err != nil {
		return err
	}
	defer func() {
		if err := cnt.close(); err != nil {
			logf("zk changes: %v", err)
		}
	}()
	ns := zkChangeNs
	idleWin := 4 * zkLongTTL
	if e.cfg.idleWindow < time.Minute {
		ns, idleWin = ns[:2], 2*zkLongTTL
	}
	for _, n := range ns {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := e.zkChangesAt(ctx, b, cnt, n, idleWin); err != nil {
			e.rep.failed(fmt.Sprintf("zk per change N=%d", n), err)
		}
	}
	e.rep.note(zkSec, "per change: in-process candidates (elector/zk, each with a session of its own, as electd processes have; --ttl %s), through the counting proxy, joining over 2 s. %d leader changes per N: each leader holds its term for %s, then resigns (Term.Resign) and campaigns again at once (a new node at the back of the line). Per change = (requests in the window − the idle rate measured over %s just before × the window's length) / %d, by op: pings (go-zookeeper's keep-alives, which every session sends every third of its timeout) go on through the window and are subtracted, so the total is noisy at N = 1000; the figure without pings is the election's own work. Handover: resign call → the next leader's Campaign return.",
		zkLongTTL, scaleChanges, kubeHold, idleWin, scaleChanges)
	return nil
}

// zkChangesAt measures one N.
func (e *env) zkChangesAt(ctx context.Context, b *backend, cnt *zkCounter, n int, idleWin time.Duration) error {
	name := fmt.Sprintf("zk-changes-%d", n)
	logFile, err := os.Create(filepath.Join(e.dir, name+".log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := slog.New(slog.NewJSONHandler(logFile, nil))
	conn, err := zk.Dial(ctx, hosts.Endpoint{Scheme: "zk", Hosts: []string{cnt.Addr()}, Settings: ebackend.Settings{Logger: log}})
	if err != nil {
		return err
	}
	s := newChangeSeries(ctx)
	defer s.close()
	for i := range n {
		if i > 0 {
			sleepCtx(ctx, 2*time.Second/time.Duration(n))
		}
		c := &cand{id: fmt.Sprintf("c%04d", i+1), resign: make(chan struct{}, 1)}
		el, err := conn.NewElector(elector.Candidate{Election: name, ID: c.id, Timing: elector.Timing{TTL: zkLongTTL}, Logger: log})
		if err != nil {
			return err
		}
		s.addLocker(c, el, func() { _ = el.Close() })
	}
	cur, err := s.firstLeader(ctx, 2*zkLongTTL+60*time.Second)
	if err != nil {
		return err
	}
	if err := waitUntil(ctx, 120*time.Second, func() bool {
		q, err := b.queued(ctx, name)
		return err == nil && q == n
	}); err != nil {
		return fmt.Errorf("%d candidates not queued: %w", n, err)
	}
	sleepCtx(ctx, 3*time.Second)
	idle, err := zkWindow(ctx, cnt, idleWin)
	if err != nil {
		return err
	}
	a, t0 := cnt.snap(), time.Now()
	lat, err := s.changes(ctx, cur, n, zkLongTTL, nil)
	if err != nil {
		return err
	}
	// The last one's rejoin.
	if err := waitUntil(ctx, 20*time.Second, func() bool {
		q, err := b.queued(ctx, name)
		return err == nil && q == n
	}); err != nil {
		return fmt.Errorf("N=%d: %d candidates not queued after the changes: %w", n, n, err)
	}
	bc, t1 := cnt.snap(), time.Now()
	chg := zkRateOf(a, bc, t1.Sub(t0))
	per := map[string]float64{}
	for _, k := range keys(chg.m, idle.m) {
		per[k] = (chg.m[k] - idle.m[k]) * chg.dur.Minutes() / scaleChanges
	}
	noPing := zkRequests(per) - per[zkPing]
	subj := fmt.Sprintf("electd, zk, --ttl %s, in process", zkLongTTL)
	e.rep.add(zkSec, subj, fmt.Sprintf("N = %d candidates: requests per leader change", n),
		fmt.Sprintf("%s without pings (%s); %s watch events; handover %s (median / p90)", num(noPing, 1), zkByOp(per, 1), num(per[zkNotify], 1), medP90(lat)), "", "")
	e.rep.add(zkSec, subj, fmt.Sprintf("N = %d candidates: idle, the whole election: requests a minute", n),
		fmt.Sprintf("%s (%s); %s watch events a minute", num(zkRequests(idle.m), 0), zkByOp(idle.m, 0), num(idle.m[zkNotify], 0)), "", "")
	logf("zk changes N=%d: per change %.1f without pings (%s), %.1f watch events; idle %.0f/min (%s); handover %s",
		n, noPing, zkByOp(per, 1), per[zkNotify], zkRequests(idle.m), zkByOp(idle.m, 0), medP90(lat))
	return nil
}
