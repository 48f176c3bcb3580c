package main

import (
	"context"
	"fmt"
	pidwatch "github.com/electd/electd/test/proc"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	costSec      = "Store cost: idle"
	footSec      = "Footprint"
	rssTarget    = 25 << 20
	idleSettle   = 5 * time.Second
	idleTTL      = defaultTTL
	idleInterval = idleTTL / 5
)

// idleCost runs, for each backend, a leader alone on one server and a
// leader with a follower on another (servers of their own, so nothing else
// is counted), at the default TTL, with `sleep` as the child. Over one
// window it counts the store's requests and the processes' CPU and memory.
func (e *env) idleCost(ctx context.Context) error {
	e.parallel(ctx,
		func(ctx context.Context) { e.try("idle etcd", func() error { return e.idleOn(ctx, "etcd") }) },
		func(ctx context.Context) { e.try("idle redis", func() error { return e.idleOn(ctx, "redis") }) },
	)
	return nil
}

// counter reads a store's request counters.
type counter interface {
	snap(ctx context.Context) (map[string]float64, error)
}

type etcdCounter struct{ s *etcdServer }

// snap returns started RPCs as "rpc:Service/Method", received messages as
// "msg:Service/Method" and sent ones as "sent:Service/Method".
func (c etcdCounter) snap(context.Context) (map[string]float64, error) {
	g, err := c.s.counts()
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for k, v := range g.started {
		m["rpc:"+k] = v
	}
	for k, v := range g.received {
		m["msg:"+k] = v
	}
	for k, v := range g.sent {
		m["sent:"+k] = v
	}
	return m, nil
}

type redisCounter struct{ s *redisServer }

func (c redisCounter) snap(ctx context.Context) (map[string]float64, error) {
	return c.s.commandStats(ctx)
}

// requests is the headline count of a delta: etcd started RPCs, Redis
// client commands (not those run inside scripts).
func requests(kind string, d map[string]float64) float64 {
	if kind == "etcd" {
		return sumMap(d, func(k string) bool { return !strings.HasPrefix(k, "rpc:") })
	}
	return electdRequests(d)
}

// detail renders the largest entries of a delta, scaled.
func detail(d map[string]float64, scale float64, keep func(string) bool) string {
	type kv struct {
		k string
		v float64
	}
	var s []kv
	for k, v := range d {
		if keep == nil || keep(k) {
			s = append(s, kv{k, v * scale})
		}
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v > s[j].v || s[i].v == s[j].v && s[i].k < s[j].k })
	var parts []string
	for i, x := range s {
		if i == 8 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", x.k, x.v))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (e *env) idleOn(ctx context.Context, kind string) error {
	type store struct {
		b   *backend
		cnt counter
	}
	mk := func(name string) (store, func(), error) {
		if kind == "etcd" {
			s, err := startEtcd(ctx, e.etcdBin, e.dir, name)
			if err != nil {
				return store{}, nil, err
			}
			return store{&backend{name: "etcd", url: "etcd://" + s.addr, etcd: s}, etcdCounter{s}}, s.close, nil
		}
		s, err := startRedis(ctx, e.redisBin, e.dir, name)
		if err != nil {
			return store{}, nil, err
		}
		return store{&backend{name: "redis", url: "redis://" + s.addr, redis: s}, redisCounter{s}}, s.close, nil
	}
	alone, stopA, err := mk("idle-" + kind + "-leader")
	if err != nil {
		return err
	}
	defer stopA()
	pair, stopB, err := mk("idle-" + kind + "-pair")
	if err != nil {
		return err
	}
	defer stopB()
	start := func(s store, id string) (*node, error) {
		return e.startNode(ctx, nodeSpec{election: "idle", id: id, store: s.b.url, dir: e.dir,
			command: []string{e.sleepBin, "86400"}})
	}
	la, err := start(alone, "leader")
	if err != nil {
		return err
	}
	defer la.kill()
	lb, err := start(pair, "leader")
	if err != nil {
		return err
	}
	defer lb.kill()
	// A fresh Redis election grants its first term one TTL after it began.
	for _, n := range []*node{la, lb} {
		if err := waitUntil(ctx, 2*idleTTL+10*time.Second, n.isLeader); err != nil {
			return fmt.Errorf("idle %s: %s did not lead: %w", kind, n.id, err)
		}
	}
	fb, err := start(pair, "follower")
	if err != nil {
		return err
	}
	defer fb.kill()
	if err := waitUntil(ctx, 20*time.Second, func() bool {
		n, err := pair.b.queued(ctx, "idle")
		d, _, lerr := fb.leader()
		return err == nil && n == 2 && lerr == nil && d.Leader != nil
	}); err != nil {
		return fmt.Errorf("idle %s: follower not queued: %w", kind, err)
	}
	sleepCtx(ctx, idleSettle)

	// A sample is the stores' counters, then the pair's electd processes.
	type usage struct {
		cpu      time.Duration
		rss, hwm int64
	}
	type sample struct {
		alone, pair      map[string]float64
		at               time.Time // when the counters were read
		leader, follower usage
	}
	take := func() (s sample, err error) {
		if s.alone, err = alone.cnt.snap(ctx); err != nil {
			return s, err
		}
		if s.pair, err = pair.cnt.snap(ctx); err != nil {
			return s, err
		}
		s.at = time.Now()
		var err1, err2 error
		s.leader.cpu, s.leader.rss, s.leader.hwm, err1 = procStat(lb.p.Pid())
		s.follower.cpu, s.follower.rss, s.follower.hwm, err2 = procStat(fb.p.Pid())
		if err1 != nil || err2 != nil {
			return s, fmt.Errorf("/proc: %v %v", err1, err2)
		}
		return s, nil
	}
	s0, err := take()
	if err != nil {
		return err
	}
	sleepCtx(ctx, e.cfg.idleWindow)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s1, err := take()
	if err != nil {
		return err
	}
	w := s1.at.Sub(s0.at)
	perMin := float64(time.Minute) / float64(w)
	da, db := diffMap(s0.alone, s1.alone), diffMap(s0.pair, s1.pair)
	leader := requests(kind, da) * perMin
	follower := (requests(kind, db) - requests(kind, da)) * perMin
	intervals := float64(time.Minute) / float64(idleInterval)
	unit := "requests"
	if kind == "etcd" {
		unit = "RPCs"
	}
	subj := "electd, " + kind
	e.rep.add(costSec, subj, fmt.Sprintf("idle follower, %s/min (--ttl %s: one renewal interval = %s)", unit, idleTTL, idleInterval),
		fmt.Sprintf("%.1f (%.2f per interval)", follower, follower/intervals), "≤ 1 per renewal interval", verdict(follower/intervals <= 1.0001))
	e.rep.add(costSec, subj, fmt.Sprintf("leader, %s/min", unit), fmt.Sprintf("%.1f (%.2f per interval)", leader, leader/intervals), "", "")
	if kind == "etcd" {
		msgs := func(d map[string]float64) float64 {
			return sumMap(d, func(k string) bool { return !strings.HasPrefix(k, "msg:") })
		}
		e.rep.note(costSec, "etcd, %s window: leader alone %s per minute; leader + follower %s. Messages received (stream messages included): leader %.1f/min, follower %.1f/min.",
			w.Round(time.Second), detail(da, perMin, func(k string) bool { return strings.HasPrefix(k, "rpc:") }),
			detail(db, perMin, func(k string) bool { return strings.HasPrefix(k, "rpc:") }),
			msgs(da)*perMin, (msgs(db)-msgs(da))*perMin)
	} else {
		client := func(k string) bool { return !scriptInner[k] }
		inner := func(k string) bool { return scriptInner[k] && k != "info" }
		e.rep.note(costSec, "redis, %s window, per minute (INFO commandstats): client requests of the leader alone %s, of leader + follower %s; commands run inside the scripts: leader alone %.0f, leader + follower %.0f.",
			w.Round(time.Second), detail(da, perMin, client), detail(db, perMin, client),
			sumMap(da, func(k string) bool { return !inner(k) })*perMin, sumMap(db, func(k string) bool { return !inner(k) })*perMin)
	}

	// Footprint of the leader and follower of the pair.
	for _, x := range []struct {
		who        string
		start, end usage
	}{{"idle leader", s0.leader, s1.leader}, {"idle follower", s0.follower, s1.follower}} {
		cpu := x.end.cpu - x.start.cpu
		e.rep.add(footSec, subj, x.who+": RSS at the end (peak)", fmt.Sprintf("%.1f MB (%.1f MB)", mb(x.end.rss), mb(x.end.hwm)), "≤ 25 MB", verdict(x.end.rss <= rssTarget))
		e.rep.add(footSec, subj, x.who+": CPU over the window", fmt.Sprintf("%s = %.3f %%", cpu, 100*float64(cpu)/float64(w)), "", "")
	}
	for _, x := range []struct {
		who string
		n   *node
	}{{"leader", lb}, {"follower", fb}} {
		heap, _, err1 := x.n.metric("go_memstats_heap_inuse_bytes")
		sys, _, err2 := x.n.metric("go_memstats_sys_bytes")
		anon, file, pss := rssSplit(x.n.p.Pid())
		if err1 == nil && err2 == nil {
			e.rep.note(footSec, "%s %s: RSS = %.1f MB anonymous + %.1f MB file-backed (pages of the binary, shared by every electd on the host: PSS %.1f MB with %d electd processes running); Go heap in use %.1f MB, Go runtime total %.1f MB.",
				kind, x.who, mb(anon), mb(file), mb(pss), countProcs(e.electd), mb(int64(heap)), mb(int64(sys)))
		}
	}
	e.rep.note(footSec, "%s: RSS from /proc/PID/status (VmRSS, VmHWM) of electd itself (not its child, `sleep`), CPU = utime+stime over the %s window (10 ms ticks), --ttl %s.", kind, w.Round(time.Second), idleTTL)
	return nil
}

// rssSplit returns a process's anonymous and file-backed resident memory,
// and its proportional set size.
func rssSplit(pid int) (anon, file, pss int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssAnon:"); ok {
			anon = parseKB(v)
		}
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			file = parseKB(v)
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Pss:"); ok {
				pss = parseKB(v)
			}
		}
	}
	return anon, file, pss
}

// countProcs counts running processes of the binary at path.
func countProcs(path string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, d := range ents {
		if pid, err := strconv.Atoi(d.Name()); err == nil && pidwatch.IsOurs(pid, path) {
			if exe, err := os.Readlink("/proc/" + d.Name() + "/exe"); err == nil && exe == path {
				n++
			}
		}
	}
	return n
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// sizes reports the binaries' sizes.
func (e *env) sizes() {
	for _, x := range []struct{ what, path string }{
		{"electd binary, production build (go build -tags noembed), measured above", e.electd},
		{"electd binary, production build stripped (-ldflags \"-s -w\")", e.electdStripped},
		{"electd binary, default build (go build: with the embedded etcd for demo and dev)", e.electdFull},
		{"etcdctl binary, for comparison", e.etcdctl},
	} {
		st, err := os.Stat(x.path)
		if err != nil {
			e.rep.failed("size of "+x.path, err)
			continue
		}
		e.rep.add(footSec, "binary", x.what, fmt.Sprintf("%.1f MB", mb(st.Size())), "", "")
	}
}
