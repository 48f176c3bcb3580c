package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/supervisor"
)

// zkPlainHeal is how long after the successor's start the plain recipe's
// cut heals: the recipe learns of its loss only from the server, so
// without a heal its guarded code runs on for as long as the cut lasts.
const zkPlainHeal = 5 * time.Second

// zkCut: a leader cut off from the server (a fault proxy between it and
// the server, black-holed) while another waits, electd and the textbook
// recipe at once (elections of their own), at 2 s and 4 s: when the
// cut-off leader's guarded code stops against when the successor's
// starts.
func (e *env) zkCut(ctx context.Context, b *backend) error {
	for _, ttl := range []time.Duration{zkShortTTL, zkLongTTL} {
		trials := max(2, e.cfg.trials/3)
		groups := max(1, trials/2)
		col := newCollector()
		e.tryParallel(ctx,
			tried{fmt.Sprintf("zk cut electd %s", ttl), func(ctx context.Context) error {
				return e.zkCutElectd(ctx, b, ttl, trials, groups, col)
			}},
			tried{fmt.Sprintf("zk cut plain recipe %s", ttl), func(ctx context.Context) error {
				return e.zkCutPlain(ctx, b, ttl, trials, groups, col)
			}},
		)
		fig := "cut-off leader: its guarded code's stop − the successor's start (negative: stopped before), median / p90"
		if ds := col.get("electd"); len(ds) > 0 {
			d := summarize(ds)
			e.rep.add(zkSec, fmt.Sprintf("electd, zk, --ttl %s", ttl), fig, medP90(ds), "< 0 (always)", verdict(d.max < 0))
			e.rep.note(zkSec, "cut, electd --ttl %s (default stop-timeout %s), %d cuts: %s; from the cut (median / p90), the old child exited after %s and the successor's child started after %s.",
				ttl, ms(supervisor.DefaultStopTimeout(elector.Timing{TTL: ttl}.WithDefaults())), d.n, d, medP90(col.get("electd exit")), medP90(col.get("electd next")))
			logf("zk cut electd %s: %s", ttl, medP90(ds))
		}
		if ds := col.get("plain"); len(ds) > 0 {
			ran := 0
			for _, x := range ds {
				if x >= 0 {
					ran++
				}
			}
			e.rep.add(zkSec, fmt.Sprintf("textbook recipe (go-zookeeper), session %s", ttl), fig, medP90(ds), "(peer)", fmt.Sprintf("ran on after the successor in %d of %d", ran, len(ds)))
			e.rep.note(zkSec, "cut, textbook recipe, session %s, %d cuts: %s; from the cut (median / p90), the successor held after %s; the cut-off holder's client saw StateDisconnected after %s (%s relative to the successor's start, median; negative: before: a holder that stopped on it would have stopped in time) and learnt of the expiry (StateExpired, its guarded code's stop) %s after the cut healed.",
				ttl, len(ds), summarize(ds), medP90(col.get("plain next")), medP90(col.get("plain disconnected")), ms(summarize(col.get("plain disc before")).med), medP90(col.get("plain after heal")))
			logf("zk cut plain %s: %s", ttl, medP90(ds))
		}
	}
	e.rep.note(zkSec, "cut: each cut-off leader reaches the server through a fault proxy of its own (internal/faultproxy), black-holed 200–500 ms after the successor was queued; the successor reaches it directly (electd: through a proxy of its own, not cut). electd's term ends by its deadline (the last request the server answered lag before a Sync, plus the negotiated timeout less drift and ε) and its child is stopped before it. The textbook recipe (test/bench/zk_plain.go: an ephemeral sequential node, exists-watch on the predecessor, guarded code from holding until its node is gone or the session expired) learns that its session expired only from the server, when it reconnects: its cut heals %s after the successor's start, and its figure is that long plus the reconnection; a cut that does not heal lets it run on for as long as it lasts.", zkPlainHeal)
	return nil
}

// zkCutElectd: two copies per election, each through a proxy of its own;
// the leader's proxy is cut; the old child's end against the new child's
// start; then the proxy heals and the old leader rejoins.
func (e *env) zkCutElectd(ctx context.Context, b *backend, ttl time.Duration, trials, ngroups int, col *collector) error {
	return trialGroups(trials, ngroups, func(g, n int) (err error) {
		c := e.newCluster(b, fmt.Sprintf("zk-cut-%s-%d", ttl, g), ttl, nil, nil)
		pxs := map[string]*faultproxy.Proxy{}
		defer func() {
			c.close()
			for _, p := range pxs {
				_ = p.Close()
			}
		}()
		defer func() { err = c.describeErr(err) }()
		for _, id := range []string{"n1", "n2"} {
			px, err := faultproxy.New(b.zk.srv.Addr())
			if err != nil {
				return err
			}
			pxs[id] = px
		}
		c.store = func(id string) string { return "zk://" + pxs[id].Addr() }
		return c.runTrials(ctx, n, 3*ttl+20*time.Second, e.cutTrial(ctx, c, pxs, "zk", ttl, col))
	})
}

// zkCutPlain: per trial a new lock, a holder through a proxy and a
// waiter; the proxy is cut; when the holder's guarded code stops against
// when the waiter's starts; the cut heals zkPlainHeal after that.
func (e *env) zkCutPlain(ctx context.Context, b *backend, ttl time.Duration, trials, ngroups int, col *collector) error {
	var seq atomic.Int64
	direct := []string{b.zk.srv.Addr()}
	return trialGroups(trials, ngroups, func(g, n int) error {
		for range n {
			name := fmt.Sprintf("cut-%s-%d", ttl, seq.Add(1))
			err := func() error {
				px, err := faultproxy.New(b.zk.srv.Addr())
				if err != nil {
					return err
				}
				defer px.Close()
				lead, err := startPlain([]string{px.Addr()}, name, "a", ttl)
				if err != nil {
					return err
				}
				defer lead.close()
				if err := waitUntil(ctx, 10*time.Second, func() bool { s, _, _, _ := lead.times(); return !s.IsZero() }); err != nil {
					return fmt.Errorf("plain %s: the first did not hold: %w", name, err)
				}
				next, err := startPlain(direct, name, "b", ttl)
				if err != nil {
					return err
				}
				defer next.close()
				sleepCtx(ctx, kubeSettle())
				cut := time.Now()
				px.Cut()
				var won time.Time
				if err := waitUntil(ctx, 3*ttl+10*time.Second, func() bool { won, _, _, _ = next.times(); return !won.IsZero() }); err != nil {
					return fmt.Errorf("plain %s: the waiter did not hold after the cut: %w", name, err)
				}
				var stopped, disc time.Time
				_, stopped, disc, _ = lead.times()
				if stopped.IsZero() {
					sleepCtx(ctx, time.Until(won.Add(zkPlainHeal)))
				}
				healed := time.Now()
				px.Heal()
				var lerr error
				if err := waitUntil(ctx, 3*ttl+20*time.Second, func() bool {
					_, stopped, disc, lerr = lead.times()
					return !stopped.IsZero() || lerr != nil
				}); err != nil || lerr != nil {
					return fmt.Errorf("plain %s: the cut-off holder did not stop within %s of the heal: %v %v", name, 3*ttl+20*time.Second, err, lerr)
				}
				col.add("plain", stopped.Sub(won))
				col.add("plain next", won.Sub(cut))
				col.add("plain after heal", stopped.Sub(healed))
				if !disc.IsZero() {
					col.add("plain disconnected", disc.Sub(cut))
					col.add("plain disc before", disc.Sub(won))
				}
				return nil
			}()
			if err != nil {
				return err
			}
		}
		return nil
	})
}
