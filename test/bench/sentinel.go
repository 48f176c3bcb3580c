package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/test/record"
)

const sentinelSec = "Sentinel failover (kill -9 of the Redis master)"

// sentinelDownAfter is testenv's down-after-milliseconds (internal/testenv,
// sentinel.go), for the notes.
const sentinelDownAfter = 2000 * time.Millisecond

// sentinelFailover: three electd copies on a Redis Sentinel topology
// (internal/testenv: one master, two replicas, three sentinels); per
// trial the master is SIGKILLed and the benchmark measures when the old
// child stopped and the new one started, against the old term's deadline;
// then the old master comes back (empty, as a replica of the new one) and
// the topology is healthy again before the next trial. --ttl 2s, then the
// default 15s with a third as many trials, each on a topology of its own.
func (e *env) sentinelFailover(ctx context.Context) error {
	goredis.SetLogger(redisLog{}) // the failover clients' "sentinel: new master" lines
	e.rep.note(sentinelSec, "Each result is min / median / p99 / max over the trials (nearest rank: with fewer than 100 trials p99 is the largest).")
	e.sentinelOn(ctx, shortTTL, e.cfg.sentinelTrials)
	if ctx.Err() == nil {
		e.sentinelOn(ctx, defaultTTL, max(1, e.cfg.sentinelTrials/3))
	}
	return nil
}

func (e *env) sentinelOn(ctx context.Context, ttl time.Duration, trials int) {
	col := newCollector()
	var survived, sigkilled atomic.Int64
	subj := fmt.Sprintf("electd, redis+sentinel, --ttl %s", ttl)
	err := withTB(ctx, "sentinel-"+ttl.String(), e.dir, func(t *benchTB) (err error) {
		s := testenv.StartRedisSentinel(t)
		view := goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName: s.MasterName(), SentinelAddrs: s.SentinelAddrs(), ContextTimeoutEnabled: true,
		})
		defer view.Close()
		b := &backend{name: "redis+sentinel", url: s.URL(), redis: &redisServer{name: "sentinel", cli: view}}
		c := e.newCluster(b, "sentinel-"+ttl.String(), ttl, nil, nil)
		defer c.close()
		defer func() { err = c.describeErr(err) }()
		for range 3 {
			if _, err := c.add(ctx); err != nil {
				return err
			}
		}
		logf("sentinel %s: topology up (%s), 3 copies started", ttl, s.URL())
		for i := range trials {
			// The first term of an epoch comes one TTL after it began.
			lead, cur, err := c.waitLeading(ctx, 2*ttl+15*time.Second)
			if err != nil {
				return err
			}
			if err := c.waitQueued(ctx, 3, 2*ttl+15*time.Second); err != nil {
				return err
			}
			if _, err := lead.validUntil(); err != nil {
				return err
			}
			master := s.Master(t)
			var mnode *testenv.RedisNode
			for _, n := range s.Nodes() {
				if n.Addr() == master {
					mnode = n
				}
			}
			if mnode == nil {
				return fmt.Errorf("sentinels report master %s, not one of ours", master)
			}

			killed := time.Now()
			mnode.Kill(t)
			// No renewal can be acknowledged after the kill: the gauge now
			// gives the term's last deadline (read conservatively early).
			vuMetric, err := lead.validUntil()
			if err != nil {
				return fmt.Errorf("trial %d: %s right after the kill: %w", i+1, lead.id, err)
			}
			type ended struct {
				at       time.Time
				graceful bool
				err      error
			}
			endC := make(chan ended, 1)
			endCtx, stopEnd := context.WithCancel(ctx)
			go func() {
				at, graceful, err := c.waitEnd(endCtx, cur.Pid, 3*ttl+30*time.Second)
				endC <- ended{at, graceful, err}
			}()
			newMaster := s.WaitFailover(t, master, 30*time.Second)
			promoted := time.Now() // when the benchmark saw it: a little late
			col.add("promoted", promoted.Sub(killed))

			// Either the old child ends (its term ran out before a renewal
			// reached the new master) or its entry survived on the promoted
			// replica and the leader renews there and keeps its term.
			var end ended
			var renewed time.Time
			err = pollEvery(ctx, 20*time.Millisecond, 2*ttl+30*time.Second, func() bool {
				select {
				case end = <-endC:
					return true
				default:
				}
				if vu, err := lead.validUntil(); err == nil && vu.After(vuMetric.Add(ttl/10)) {
					renewed = time.Now()
					return true
				}
				return false
			})
			stopEnd()
			if err != nil {
				return fmt.Errorf("trial %d: the old child %s neither stopped nor kept a renewed term: %w", i+1, &cur, err)
			}
			if !renewed.IsZero() {
				// The same child must still run, and no other have started.
				if now, ok := c.rec.current(); !ok || now.Pid != cur.Pid {
					return fmt.Errorf("trial %d: %s renewed its term on the new master, but its child %s is not the one running (%v)", i+1, lead.id, &cur, &now)
				}
				survived.Add(1)
				col.add("renewedAfterKill", renewed.Sub(killed))
				logf("sentinel %s: trial %d: %s kept its term on %s (renewed %s after the kill)", ttl, i+1, lead.id, newMaster, ms(renewed.Sub(killed)))
			} else {
				if end.err != nil {
					return end.err
				}
				if !end.graceful {
					sigkilled.Add(1)
				}
				next, err := c.rec.waitRun(ctx, 2*ttl+30*time.Second, "the child after "+cur.String(), func(r record.Run) bool {
					return r.Start.After(cur.Start) && r.Pid != cur.Pid
				})
				if err != nil {
					return err
				}
				// The old term's deadline: exact from electd's own log line
				// when the deadline stopped it, else the gauge's.
				vu, exact := lead.stopValidUntil(killed)
				if !exact {
					vu = vuMetric
				}
				bound := vu.Add(-window(ttl)).Add(ttl) // last acknowledged renewal + TTL
				if !next.Start.After(end.at) {
					e.rep.violation("%s: new child %s started %s BEFORE the old child %s stopped", c.election, &next, ms(end.at.Sub(next.Start)), &cur)
				}
				if next.Start.Before(bound) {
					e.rep.violation("%s: new child started %s after the master's kill, %s BEFORE the old lease could lapse", c.election, ms(next.Start.Sub(killed)), ms(bound.Sub(next.Start)))
				}
				if !end.at.Before(vu) {
					e.rep.violation("%s: the old child ran until %s after its term's ValidUntil", c.election, ms(end.at.Sub(vu)))
				}
				col.add("stopped", end.at.Sub(killed))
				col.add("started", next.Start.Sub(killed))
				col.add("stopBeforeVU", vu.Sub(end.at))
				col.add("startOverBound", next.Start.Sub(bound))
				col.add("gap", next.Start.Sub(end.at))
				col.add("vuFromKill", vu.Sub(killed))
				if exact {
					col.add("vuExact", 0)
				}
				if born, err := epochBorn(ctx, newMaster, c.election); err == nil {
					col.add("born", born.Sub(killed))
					col.add("bornToStart", next.Start.Sub(born))
				} else {
					logf("sentinel %s: trial %d: epoch start on %s: %v", ttl, i+1, newMaster, err)
				}
				logf("sentinel %s: trial %d: master killed; old child stopped +%s, promoted +%s, new child (%s) +%s",
					ttl, i+1, ms(end.at.Sub(killed)), ms(promoted.Sub(killed)), next.Node, ms(next.Start.Sub(killed)))
			}
			// Health before the next trial: the old master back, empty, as a
			// replica of the new one; every sentinel agrees again.
			s.Start(t)
		}
		c.checkOverlaps(e.rep)
		return nil
	})
	if err != nil {
		e.rep.failed("sentinel failover ttl "+ttl.String(), err)
	}
	st := summarize(col.get("started"))
	stopped := summarize(col.get("stopped"))
	n := int(survived.Load()) + st.n
	if n == 0 {
		return
	}
	if st.n > 0 {
		over := summarize(col.get("startOverBound"))
		stopM := summarize(col.get("stopBeforeVU"))
		gap := summarize(col.get("gap"))
		e.rep.add(sentinelSec, subj, "master killed → old child stopped", mmpm(stopped), "", "")
		e.rep.add(sentinelSec, subj, "master killed → new child started", mmpm(st), "", "")
		e.rep.add(sentinelSec, subj, "old term's ValidUntil − old child's stop", mmpm(stopM), "> 0", verdict(stopM.min > 0))
		e.rep.add(sentinelSec, subj, "new child's start − (last acknowledged renewal + TTL)", mmpm(over), "≥ 0", verdict(over.min >= 0))
		e.rep.add(sentinelSec, subj, "old child's stop → new child's start", mmpm(gap), "> 0", verdict(gap.min > 0))
		e.rep.note(sentinelSec, "electd on redis+sentinel, --ttl %s, %d failovers (3 copies; the master SIGKILLed, restarted as a replica and the topology healthy again between trials): "+
			"old child stopped %s after the kill (%d by SIGKILL at the stop timeout); new child started %s; the old term's ValidUntil came %s after the kill (%d of %d from electd's \"lease deadline near\" log line, the rest from /metrics); "+
			"sentinels reported the new master %s after the kill (the benchmark's polling); the new master's epoch began %s after the kill, and the new child started %s after that.",
			ttl, st.n, stopped, sigkilled.Load(), st, summarize(col.get("vuFromKill")), len(col.get("vuExact")), st.n,
			summarize(col.get("promoted")), summarize(col.get("born")), summarize(col.get("bornToStart")))
	}
	if sv := survived.Load(); sv > 0 || ttl != shortTTL {
		e.rep.add(sentinelSec, subj, "leader's term survived the failover (its entry was on the promoted replica; child kept running)",
			fmt.Sprintf("%d of %d", sv, n), "", "")
		if r := summarize(col.get("renewedAfterKill")); r.n > 0 {
			e.rep.add(sentinelSec, subj, "master killed → the leader's first renewal acknowledged by the new master (term kept)", mmpm(r), "", "")
			e.rep.note(sentinelSec, "electd on redis+sentinel, --ttl %s: in %d of %d trials the leader's entry was on the promoted replica (WAIT 1 had it replicated), so the leader's next renewal on the new master kept its term and its child never stopped: renewed %s after the kill; sentinels reported the new master %s after the kill. "+
				"At this TTL the promotion (down-after %s + the vote) comes well inside the term, so there is no handover to time; the new epoch's one-TTL wait holds back only a term that is not already held.",
				ttl, r.n, n, r, summarize(col.get("promoted")), ms(sentinelDownAfter))
		}
	}
	if ttl == shortTTL {
		e.rep.note(sentinelSec, "Where the time goes: Sentinel's down-after-milliseconds (%s in internal/testenv) before the master is even suspected, then the sentinels' vote and promotion (about 1 s here); "+
			"then electd's Redis backend sees a new run_id on the promoted replica, starts a new epoch and grants no term for one TTL after it, since the replica may lack the last renewals. "+
			"With --ttl 2s the old term's deadline (at most 2 s after the kill) always comes before the promotion, so the old child has stopped before there is a new master at all.", ms(sentinelDownAfter))
	}
}

// mmpm is "min / median / p99 / max".
func mmpm(d dist) string {
	if d.n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s / %s / %s / %s", ms(d.min), ms(d.med), ms(d.p99), ms(d.max))
}

// stopValidUntil returns the valid_until of n's first "lease deadline
// near" log line after since: the exact local deadline of the term the
// deadline ended.
func (n *node) stopValidUntil(since time.Time) (time.Time, bool) {
	b, err := readFileLimit(n.log, 8<<20)
	if err != nil {
		return time.Time{}, false
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"msg":"lease deadline near without renewal`) {
			continue
		}
		var v struct {
			Time       time.Time `json:"time"`
			Supervisor struct {
				ValidUntil time.Time `json:"valid_until"`
			} `json:"supervisor"`
		}
		if json.Unmarshal([]byte(line), &v) == nil && v.Time.After(since) && !v.Supervisor.ValidUntil.IsZero() {
			return v.Supervisor.ValidUntil, true
		}
	}
	return time.Time{}, false
}

// epochBorn reads when the election's state began on the Redis at addr
// (electd:{NAME}:born, server microseconds; same host, same clock).
func epochBorn(ctx context.Context, addr, election string) (time.Time, error) {
	cli := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := cli.HGet(ctx, "electd:{"+election+"}:born", "at").Result()
	if err != nil {
		return time.Time{}, err
	}
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMicro(us), nil
}

// pollEvery checks cond every interval until it holds, ctx ends or d passes.
func pollEvery(ctx context.Context, interval, d time.Duration, cond func() bool) error {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("not within %s", d)
		case <-tick.C:
		}
	}
}

// redisLog writes go-redis's own log lines (the benchmark's failover
// clients: "sentinel: new master ...") as the benchmark's.
type redisLog struct{}

func (redisLog) Printf(_ context.Context, format string, v ...any) {
	logf("go-redis: %s", fmt.Sprintf(format, v...))
}
