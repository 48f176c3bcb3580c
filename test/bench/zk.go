package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/internal/testenv"
)

// The zk phase: electd's ZooKeeper backend (zk://) on one standalone
// ZooKeeper server (internal/testenv.StartZK: Debian's zookeeper package,
// tickTime 200 ms, so sessions of 400 ms to 4 s), beside the textbook
// lock recipe on go-zookeeper for the cut-off figure.
const (
	zkSec = "ZooKeeper"
	// zkShortTTL and zkLongTTL are the TTLs of the timing figures: 2 s,
	// as the other backends' short figures, and 4 s, the longest session
	// the server grants at its 200 ms tick (20 ticks); electd's default
	// --ttl 15s would be negotiated down to it.
	zkShortTTL = 2 * time.Second
	zkLongTTL  = 4 * time.Second
	// zkTick is the server's tickTime (internal/testenv).
	zkTick = 200 * time.Millisecond
	// zkFailoverSlack is crash failover's allowance over the TTL on
	// ZooKeeper: the server expires sessions in tick-wide buckets (up to
	// a tick late), and the successor's term starts after a proof that
	// waits lag (0.75 tick + 20 ms, elector/zk) after its write; 100 ms
	// more for the rest: the notification, the successor's four round
	// trips (list, write, Sync, read) and the child's start (about 20 ms
	// alone, Graceful handover's notes).
	zkFailoverSlack = zkTick + zkTick*3/4 + 20*time.Millisecond + 100*time.Millisecond
	// zkIdleN followers in the idle window.
	zkIdleN = 10
)

// zkChangeNs are the candidates of the per-change figures (-quick: the
// first two).
var zkChangeNs = []int{10, 100, 1000}

// zkEnv is the phase's server and the benchmark's own client of it.
type zkEnv struct {
	srv   *testenv.ZK
	admin *gozk.Conn
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// zkConnect opens a go-zookeeper session to addrs without its log.
func zkConnect(addrs []string, timeout time.Duration) (*gozk.Conn, <-chan gozk.Event, error) {
	c, ev, err := gozk.Connect(addrs, timeout, gozk.WithLogInfo(false), gozk.WithLogger(zkQuiet{}))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to zookeeper %v: %w", addrs, err)
	}
	return c, ev, nil
}

// queued counts an electd election's candidate nodes (the protected
// sequential nodes, "_c_GUID-c-SEQ"), read directly from the server.
func (z *zkEnv) queued(ctx context.Context, election string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	names, _, err := z.admin.Children("/electd/elections/" + election)
	if errors.Is(err, gozk.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list election %s: %w", election, err)
	}
	n := 0
	for _, name := range names {
		if strings.HasPrefix(name, "_c_") && strings.Contains(name, "-c-") {
			n++
		}
	}
	return n, nil
}

// zkPhase: electd on ZooKeeper: graceful handover and crash failover (in
// the sections of the other backends), a cut-off leader beside the
// textbook recipe, an idle follower's requests, and requests per leader
// change at N candidates.
func (e *env) zkPhase(ctx context.Context) error {
	started := time.Now()
	return withTB(ctx, "zk", e.dir, func(t *benchTB) error {
		srv := testenv.StartZK(t)
		admin, _, err := zkConnect([]string{srv.Addr()}, 10*time.Second)
		if err != nil {
			return err
		}
		defer admin.Close()
		z := &zkEnv{srv: srv, admin: admin}
		b := &backend{name: "zk", url: "zk://" + srv.Addr(), zk: z}
		logf("zk: zookeeper on %s (%s), ready in %s", srv.Addr(), srv.Mode(), time.Since(started).Round(time.Millisecond))
		e.rep.note(zkSec, "One standalone ZooKeeper 3.8 server (Debian's package, internal/testenv.StartZK: tickTime %s, so the server grants sessions of %s to %s; electd's default --ttl 15s would be negotiated down to %s) on loopback, shared by every figure; electd reaches it as zk://127.0.0.1:PORT (no chroot, no auth). The handover and crash figures are in the sections of the other backends (subject \"electd, zk\"); so are those on a 3-server ensemble (internal/testenv.StartZKEnsemble, same tick; \"electd, zk-ensemble\": handover by POST /resign and crash failover at 2 s).",
			zkTick, 2*zkTick, 20*zkTick, 20*zkTick)
		e.rep.note(zkSec, "%s when this phase began; the machine is shared and every millisecond figure is noisy.", loadavg())
		steps := []struct {
			what string
			f    func() error
		}{
			{"zk: graceful handover", func() error { return e.zkHandover(ctx, b) }},
			{"zk: crash failover", func() error { return e.zkCrash(ctx, b) }},
			{"zk: ensemble", func() error { return e.zkEnsemble(ctx, t) }},
			{"zk: cut-off leader", func() error { return e.zkCut(ctx, b) }},
			{"zk: idle follower", func() error { return e.zkIdle(ctx, b) }},
			{"zk: per leader change", func() error { return e.zkChanges(ctx, b) }},
		}
		for _, s := range steps {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logf("%s", s.what)
			t0 := time.Now()
			e.try(s.what, s.f)
			logf("%s: took %s", s.what, time.Since(t0).Round(time.Second))
		}
		e.rep.note(zkSec, "The phase took %s (server start included).", time.Since(started).Round(time.Second))
		return nil
	})
}

// zkHandover: the Graceful handover figures (handoverElectd, --ttl 2s)
// on ZooKeeper.
func (e *env) zkHandover(ctx context.Context, b *backend) error {
	const sec = "Graceful handover"
	for _, mode := range []string{"resign", "sigterm", "exit"} {
		gaps, total, err := e.handoverElectd(ctx, b, mode)
		if err != nil {
			e.rep.failed("handover zk "+mode, err)
			continue
		}
		d := summarize(gaps)
		what := handoverWhat[mode]
		e.rep.add(sec, "electd, zk", what, d.short(), "p99 < 20 ms", verdict(d.n > 0 && d.p99 < handoverTarget))
		e.rep.note(sec, "electd on zk, %s: %s (p90 %s); from the request/signal to the new child's start: %s.", mode, d, ms(p90(gaps)), summarize(total))
		logf("zk handover %s: %s (p90 %s)", mode, d, ms(p90(gaps)))
	}
	return nil
}

// zkCrash: the Crash failover figures (crashElectd) on ZooKeeper at 2 s
// and 4 s.
func (e *env) zkCrash(ctx context.Context, b *backend) error {
	e.crashElectd(ctx, b, e.tree(), zkShortTTL, e.cfg.trials, e.cfg.groups)
	long := max(1, e.cfg.longTrials/2)
	e.crashElectd(ctx, b, e.tree(), zkLongTTL, long, max(1, min(e.cfg.groups, long)))
	e.rep.note("Crash failover", "electd on zk: the target's allowance over the TTL is %s: the server expires sessions in %s buckets (up to a tick late), and the successor's term starts after a proof that waits lag (0.75 tick + 20 ms) after its write; 100 ms for the notification, the successor's round trips and its child's start.", ms(zkFailoverSlack), zkTick)
	return nil
}

// p90 is the nearest-rank 90th percentile (0 for none).
func p90(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(0.9*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// medP90 renders "median / p90 (n=N)".
func medP90(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s / %s (n=%d)", ms(summarize(ds).med), ms(p90(ds)), len(ds))
}

// zkByOp renders a delta of zkCounter counts by op, largest first, the
// watch events apart.
func zkByOp(d map[string]float64, prec int) string {
	type kv struct {
		k string
		v float64
	}
	var s []kv
	for k, v := range d {
		if k == zkNotify || math.Abs(v) < 0.05 {
			continue
		}
		s = append(s, kv{k, v})
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v > s[j].v || s[i].v == s[j].v && s[i].k < s[j].k })
	var parts []string
	for _, x := range s {
		parts = append(parts, x.k+" "+strconv.FormatFloat(x.v, 'f', prec, 64))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// zkRequests sums a delta's requests (handshakes and pings included, the
// watch events not).
func zkRequests(d map[string]float64) float64 {
	return sumMap(d, func(k string) bool { return k == zkNotify })
}

// zkEnsemble: handover (POST /resign) and crash failover at 2 s on a
// 3-server ensemble (internal/testenv.StartZKEnsemble), electd given all
// three servers; the ensemble is killed afterwards. t must be the phase's
// benchTB, on its goroutine.
func (e *env) zkEnsemble(ctx context.Context, t *benchTB) error {
	t0 := time.Now()
	ens := testenv.StartZKEnsemble(t)
	defer ens.Kill(t)
	admin, _, err := zkConnect(ens.Addrs(), 10*time.Second)
	if err != nil {
		return err
	}
	defer admin.Close()
	b := &backend{name: "zk-ensemble", url: "zk://" + strings.Join(ens.Addrs(), ","), zk: &zkEnv{admin: admin}}
	logf("zk: ensemble on %s, ready in %s", strings.Join(ens.Addrs(), ","), time.Since(t0).Round(time.Millisecond))
	gaps, total, err := e.handoverElectd(ctx, b, "resign")
	if err != nil {
		e.rep.failed("handover zk-ensemble resign", err)
	} else {
		d := summarize(gaps)
		e.rep.add("Graceful handover", "electd, zk-ensemble", "POST /resign: old child's exit → new child's start", d.short(), "p99 < 20 ms", verdict(d.n > 0 && d.p99 < handoverTarget))
		e.rep.note("Graceful handover", "electd on zk-ensemble (3 ZooKeeper servers, electd given all three), resign: %s (p90 %s); from the request to the new child's start: %s.", d, ms(p90(gaps)), summarize(total))
		logf("zk ensemble handover resign: %s (p90 %s)", d, ms(p90(gaps)))
	}
	trials := max(2, e.cfg.trials/2)
	e.crashElectd(ctx, b, e.tree(), zkShortTTL, trials, max(1, min(e.cfg.groups, trials)))
	return nil
}
