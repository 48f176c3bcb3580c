package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/supervisor"
	"github.com/electd/electd/test/record"
)

// stepDown: the leader's connection to the store is black-holed (both
// copies reach the store through proxies of their own); measure when its
// child exits against the earliest instant the store could grant the next
// term.
func (e *env) stepDown(ctx context.Context) error {
	e.parallel(ctx,
		func(ctx context.Context) { e.stepDownOn(ctx, e.etcd) },
		func(ctx context.Context) { e.stepDownOn(ctx, e.redis) },
	)
	return nil
}

func (e *env) stepDownOn(ctx context.Context, b *backend) {
	const sec = "Cut-off leader: step-down margin"
	ttl := shortTTL
	col := newCollector()
	var killed atomic.Int64
	ngroups := max(1, e.cfg.groups-1)
	err := trialGroups(e.cfg.trials, ngroups, func(g, n int) (err error) {
		c := e.newCluster(b, fmt.Sprintf("cut-%d", g), ttl, nil, nil)
		pxs := map[string]*faultproxy.Proxy{}
		defer func() {
			c.close()
			for _, p := range pxs {
				_ = p.Close()
			}
		}()
		defer func() { err = c.describeErr(err) }()
		for _, id := range []string{"n1", "n2"} {
			px, err := faultproxy.New(b.addr())
			if err != nil {
				return err
			}
			pxs[id] = px
		}
		c.store = func(id string) string { return b.storeURL(pxs[id].Addr()) }
		return c.runTrials(ctx, n, 3*ttl+5*time.Second, func(lead *node, cur record.Run) error {
			px := pxs[lead.id]
			cut := time.Now()
			px.Cut()
			// No acknowledgement reaches the leader after the cut: its
			// deadline now is the one of its last acknowledged renewal.
			vu, err := lead.validUntil()
			if err != nil {
				return err
			}
			bound := vu.Add(-window(ttl)).Add(ttl) // last acknowledged renewal + TTL
			var storeDeadline time.Time
			if b.redis != nil {
				storeDeadline, err = redisDeadline(ctx, b, c.election, lead.id)
				if err != nil {
					return err
				}
			}
			end, graceful, err := c.waitEnd(ctx, cur.Pid, ttl+2*time.Second)
			if err != nil {
				return err
			}
			if !graceful {
				killed.Add(1)
			}
			next, err := c.nextRun(ctx, cur, ttl+10*time.Second)
			if err != nil {
				return err
			}
			if !end.Before(bound) {
				e.rep.violation("%s on %s: the cut-off leader's child ran until %s after the last acknowledged renewal + TTL", c.election, b.name, ms(end.Sub(bound)))
			}
			if !next.Start.After(end) {
				e.rep.violation("%s on %s: the new child started %s before the cut-off one exited", c.election, b.name, ms(end.Sub(next.Start)))
			}
			col.add("margin", bound.Sub(end))
			col.add("exitAfterCut", end.Sub(cut))
			col.add("observed", next.Start.Sub(end))
			if !storeDeadline.IsZero() {
				col.add("storeMargin", storeDeadline.Sub(end))
			}
			px.Heal()
			// The old leader rejoins as a follower.
			if err := c.waitQueued(ctx, 2, ttl+10*time.Second); err != nil {
				return err
			}
			if err := waitUntil(ctx, 10*time.Second, func() bool {
				d, _, err := lead.leader()
				return err == nil && d.Leader != nil && !d.Self.Leader
			}); err != nil {
				return fmt.Errorf("%s did not follow after the heal: %w", lead.id, err)
			}
			return nil
		})
	})
	if err != nil {
		e.rep.failed("step-down "+b.name, err)
	}
	m := summarize(col.get("margin"))
	if m.n == 0 {
		return
	}
	subj := fmt.Sprintf("electd, %s, --ttl %s", b.name, ttl)
	e.rep.add(sec, subj, "last acknowledged renewal + TTL − old child's exit", m.short()+" (min "+ms(m.min)+")", "> 0", verdict(m.min > 0))
	if sm := summarize(col.get("storeMargin")); sm.n > 0 {
		e.rep.add(sec, subj, "lease deadline read from Redis − old child's exit", sm.short()+" (min "+ms(sm.min)+")", "> 0", verdict(sm.min > 0))
	}
	obs := summarize(col.get("observed"))
	e.rep.add(sec, subj, "old child's exit → new child's start (observed)", obs.short(), "> 0", verdict(obs.min > 0))
	e.rep.add(lostSec, subj, "leader cut off from the store (black hole)",
		fmt.Sprintf("child stopped %s after the cut, ≥ %s before the store could grant (%d of %d cuts)", ms(summarize(col.get("exitAfterCut")).med), ms(m.min), m.n, m.n),
		"stops before the successor?", yesno(m.min > 0))
	e.rep.note(sec, "electd on %s, --ttl %s (default stop-timeout %s), %d cuts: margin %s; the child exited %s after the cut (%d of them SIGKILLed rather than stopped by SIGTERM); the successor's child started %s after it.",
		b.name, ttl, ms(supervisor.DefaultStopTimeout(elector.Timing{TTL: ttl}.WithDefaults())), m.n, m, summarize(col.get("exitAfterCut")), killed.Load(), obs)
}

// redisDeadline reads the lease deadline of id's entry from the election's
// expiry set (server microseconds; the server runs on this host's clock).
func redisDeadline(ctx context.Context, b *backend, election, id string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	zs, err := b.redis.cli.ZRangeWithScores(ctx, "electd:{"+election+"}:expiry", 0, -1).Result()
	if err != nil {
		return time.Time{}, err
	}
	for _, z := range zs {
		if m, ok := z.Member.(string); ok && strings.HasPrefix(m, id+"#") {
			return time.UnixMicro(int64(z.Score)), nil
		}
	}
	return time.Time{}, fmt.Errorf("no expiry entry for %s in %s", id, election)
}
