package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/electd/electd/internal/release"
	pidwatch "github.com/electd/electd/test/proc"
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
// leader with a follower on another, and on etcd a leader, its head waiter
// and a third copy behind that on a third (servers of their own, so
// nothing else is counted), at the default TTL, with `sleep` as the child.
// Over one window it counts the store's requests, per copy and method,
// and the processes' CPU and memory.
func (e *env) idleCost(ctx context.Context) error {
	e.tryParallel(ctx,
		tried{"idle etcd", func(ctx context.Context) error { return e.idleOn(ctx, "etcd") }},
		tried{"idle redis", func(ctx context.Context) error { return e.idleOn(ctx, "redis") }},
	)
	return nil
}

// counter reads a store's request counters.
type counter interface {
	snap(ctx context.Context) (map[string]float64, error)
}

type etcdCounter struct{ s *etcdServer }

// snap returns started RPCs as "rpc:Service/Method", ended ones as
// "done:Service/Method", received messages as "msg:Service/Method" and
// sent ones as "sent:Service/Method".
func (c etcdCounter) snap(context.Context) (map[string]float64, error) {
	g, err := c.s.counts()
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for k, v := range g.started {
		m["rpc:"+k] = v
	}
	for k, v := range g.handled {
		m["done:"+k] = v
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
	// Store i runs the first i+1 copies: the leader alone; + a follower,
	// the head of the queue; and on etcd + a third copy, queued behind the
	// head waiter (it watches that waiter's key, not the leader's lease).
	// One copy's requests are those of its store less those of the store
	// before it, over the same window.
	roles := []string{"leader", "follower"}
	if kind == "etcd" {
		roles = []string{"leader", "head waiter", "follower behind the head"}
	}
	stores := make([]store, len(roles))
	nodes := make([][]*node, len(roles))
	for i := range roles {
		s, stop, err := mk(fmt.Sprintf("idle-%s-%d", kind, i+1))
		if err != nil {
			return err
		}
		defer stop()
		stores[i] = s
	}
	start := func(s store, id string) (*node, error) {
		return e.startNode(ctx, nodeSpec{election: "idle", id: id, store: s.b.url, dir: e.dir,
			command: []string{e.sleepBin, "86400"}})
	}
	for i, s := range stores {
		n, err := start(s, "leader")
		if err != nil {
			return err
		}
		defer n.kill()
		nodes[i] = append(nodes[i], n)
	}
	// A fresh Redis election grants its first term one TTL after it began.
	for i := range stores {
		n := nodes[i][0]
		if err := waitUntil(ctx, 2*idleTTL+10*time.Second, n.isLeader); err != nil {
			return fmt.Errorf("idle %s: %s did not lead: %w", kind, n.id, err)
		}
	}
	for i, s := range stores {
		for k := 1; k <= i; k++ {
			id := fmt.Sprintf("follower%d", k)
			n, err := start(s, id)
			if err != nil {
				return err
			}
			defer n.kill()
			nodes[i] = append(nodes[i], n)
			// Queued, and its leader view current, before the next joins:
			// the copies queue in this order.
			if err := waitUntil(ctx, 20*time.Second, func() bool {
				q, err := s.b.queued(ctx, "idle")
				d, _, lerr := n.leader()
				return err == nil && q == k+1 && lerr == nil && d.Leader != nil
			}); err != nil {
				return fmt.Errorf("idle %s: %s not queued: %w", kind, id, err)
			}
		}
	}
	sleepCtx(ctx, idleSettle)

	// A sample is the stores' counters, then the pair's electd processes.
	type usage struct {
		cpu      time.Duration
		rss, hwm int64
	}
	type sample struct {
		counts           []map[string]float64
		at               time.Time // when the counters were read
		leader, follower usage
	}
	lb, fb := nodes[1][0], nodes[1][1]
	take := func() (s sample, err error) {
		for _, st := range stores {
			m, err := st.cnt.snap(ctx)
			if err != nil {
				return s, err
			}
			s.counts = append(s.counts, m)
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
	// Each copy's delta over the window: its store's less the store's
	// before it.
	deltas := make([]map[string]float64, len(stores))
	copies := make([]map[string]float64, len(stores))
	for i := range stores {
		deltas[i] = diffMap(s0.counts[i], s1.counts[i])
		copies[i] = deltas[i]
		if i > 0 {
			copies[i] = diffMap(deltas[i-1], deltas[i])
		}
	}
	intervals := float64(w) / float64(idleInterval)
	subj := "electd, " + kind
	if kind == "etcd" {
		e.idleEtcd(subj, roles, copies, w, intervals)
	} else {
		for i, role := range roles {
			req := redisRequests(copies[i])
			total := sumMap(req, nil)
			figure, target, ok := "idle "+role+", requests per renewal interval", "", ""
			if i == 1 {
				figure += fmt.Sprintf(" (--ttl %s: %s)", idleTTL, idleInterval)
				target, ok = "≤ 1", verdict(fits(req, 1, intervals))
			}
			e.rep.add(costSec, subj, figure, fmt.Sprintf("%.2f (%s)", total/intervals, detail(req, 1/intervals, nil)), target, ok)
		}
		client := func(k string) bool { return !scriptInner[k] }
		inner := func(k string) bool { return scriptInner[k] && k != "info" }
		e.rep.note(costSec, "redis, %s window, per minute (INFO commandstats): client requests of the leader alone %s, of leader + follower %s; commands run inside the scripts: leader alone %.0f, leader + follower %.0f.",
			w.Round(time.Second), detail(deltas[0], perMin, client), detail(deltas[1], perMin, client),
			sumMap(deltas[0], func(k string) bool { return !inner(k) })*perMin, sumMap(deltas[1], func(k string) bool { return !inner(k) })*perMin)
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
	// The split of both first: a scrape of /metrics allocates (about
	// 100 KB), and would add to the RSS it explains.
	pair := []struct {
		who             string
		n               *node
		anon, file, pss int64
	}{{who: "leader", n: lb}, {who: "follower", n: fb}}
	for i := range pair {
		pair[i].anon, pair[i].file, pair[i].pss = rssSplit(pair[i].n.p.Pid())
	}
	for _, x := range pair {
		heap, _, err1 := x.n.metric("go_memstats_heap_inuse_bytes")
		sys, _, err2 := x.n.metric("go_memstats_sys_bytes")
		if err1 == nil && err2 == nil {
			e.rep.note(footSec, "%s %s: RSS = %.1f MB anonymous + %.1f MB file-backed (pages of the binary, shared by every electd on the host: PSS %.1f MB with %d electd processes running); Go heap in use %.1f MB, Go runtime total %.1f MB.",
				kind, x.who, mb(x.anon), mb(x.file), mb(x.pss), countProcs(e.electd), mb(int64(heap)), mb(int64(sys)))
		}
	}
	e.rep.note(footSec, "%s: RSS from /proc/PID/status (VmRSS, VmHWM) of electd itself (not its child, `sleep`), CPU = utime+stime over the %s window (10 ms ticks), --ttl %s.", kind, w.Round(time.Second), idleTTL)
	return nil
}

// idleEtcd reports each etcd copy's requests per renewal interval, by
// method, against its target: the leader renews once an interval, each
// renewal followed by the raft entry that proves it (a KV/Txn that writes
// nothing, elector/etcd/renewal.go), and sends nothing else; the head waiter
// renews (with its read) and reads its leader's lease (LeaseTimeToLive)
// once an interval each; a follower behind it only renews (with its
// read). A request here is a unary call or a stream opened, except
// on Watch, where it is a message received (less one for each stream that
// ended: its end counts as a message): a watch created on a stream
// already open opens none, and one stream carries many watches.
func (e *env) idleEtcd(subj string, roles []string, copies []map[string]float64, w time.Duration, intervals float64) {
	targets := []struct {
		perInterval float64
		what        string
	}{{2, "≤ 2 (its renewal and the entry that proves it, nothing else)"}, {3, "≤ 3"}, {2, "≤ 2"}}
	var notes []string
	for i, role := range roles {
		d := copies[i]
		req := etcdRequests(d)
		total := sumMap(req, nil)
		ok := fits(req, targets[i].perInterval, intervals)
		if i == 0 {
			ok = ok && total == req["Lease/LeaseKeepAlive"]+req["KV/Txn"]+req["KV/Range"]
		}
		byMethod := detail(req, 1/intervals, nil)
		e.rep.add(costSec, subj, fmt.Sprintf("idle %s: store requests per renewal interval (--ttl %s: %s)", role, idleTTL, idleInterval),
			fmt.Sprintf("%.2f (%s)", total/intervals, byMethod), targets[i].what, verdict(ok))
		notes = append(notes, fmt.Sprintf("%s %.0f requests (%s; messages received %s)", role, total,
			detail(req, 1, nil), detail(d, 1, func(k string) bool { return strings.HasPrefix(k, "msg:") })))
	}
	e.rep.note(costSec, "etcd, %s window (%.2f renewal intervals), per copy: %s. Counted from etcd's grpc_server_started_total (a unary call or a stream opened: each renewal opens a LeaseKeepAlive stream for one message; its close counts as a second message received) and, for Watch, grpc_server_msg_received_total less grpc_server_handled_total (a watch created on an open stream opens no stream; a stream's end counts as a message); three servers, one with the leader alone, one with leader and head waiter, one with all three, over the same window, and a copy's requests are its server's less the one before it's. A request sent every P falls at most floor(window/P)+1 times in a window, by its phase: a verdict allows one more per method than the target's rate over the window.",
		w.Round(100*time.Millisecond), intervals, strings.Join(notes, "; "))
}

// fits reports whether the requests of one copy over a window of
// intervals renewal intervals are within perInterval: a request sent
// every P falls at most floor(window/P)+1 times in the window, depending on
// its phase, so each method may show one more than its rate.
func fits(req map[string]float64, perInterval, intervals float64) bool {
	methods := 0
	for _, v := range req {
		if v > 0 {
			methods++
		}
	}
	return sumMap(req, nil) <= perInterval*intervals+float64(methods)
}

// redisRequests are the client requests in a delta of commandstats, by
// command: not the commands electd's scripts run inside Redis.
func redisRequests(d map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range d {
		if !scriptInner[k] {
			out[k] = v
		}
	}
	return out
}

// etcdRequests are the requests in a delta of etcd's counters, by method
// (see idleEtcd).
func etcdRequests(d map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range d {
		switch {
		case k == "msg:Watch/Watch":
			out["Watch/Watch"] += v
		case k == "done:Watch/Watch":
			out["Watch/Watch"] -= v // the stream's end, counted as a message
		case k == "rpc:Watch/Watch":
		case strings.HasPrefix(k, "rpc:"):
			out[strings.TrimPrefix(k, "rpc:")] += v
		}
	}
	return out
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
		{"electd binary, production build (" + release.Command("electd", "./cmd/electd") + "), measured above", e.electd},
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
