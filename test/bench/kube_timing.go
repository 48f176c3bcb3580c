package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/supervisor"
	pidwatch "github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// kubeSettle is the random pause before a timed event, after the other
// side is ready: 200–500 ms.
func kubeSettle() time.Duration { return 200*time.Millisecond + rand.N(300*time.Millisecond) }

// kubeHandover: 1. graceful handover. electd (POST /resign and SIGTERM to
// electd: old child's exit → new child's start, at --ttl 15s), then
// client-go with ReleaseOnCancel on and off (SIGTERM to the leader's
// program: its OnStoppedLeading → the next one's OnStartedLeading), at
// client-go's default timing.
func (e *env) kubeHandover(ctx context.Context, kb *kubeEnv, b *backend) error {
	const fig = "1. graceful handover"
	var electdSIGTERM dist
	for _, mode := range []string{"resign", "sigterm"} {
		gaps, total, parts, err := e.kubeHandoverElectd(ctx, b, mode)
		if err != nil {
			e.rep.failed("k8s handover electd "+mode, err)
			continue
		}
		d := summarize(gaps)
		if mode == "sigterm" {
			electdSIGTERM = d
		}
		what := map[string]string{
			"resign":  "POST /resign: old child's exit → new child's start",
			"sigterm": "SIGTERM to electd: old child's exit → new child's start",
		}[mode]
		e.rep.add(kubeSec, fmt.Sprintf("electd, k8s, --ttl %s", kubeLongTTL), fig+": "+what, d.String(), "p99 < 20 ms", verdict(d.n > 0 && d.p99 < kubeHandoverTarget))
		e.rep.note(kubeSec, "1, electd, %s: from the request or signal to the new child's start %s. Where the gap goes (median / p99, from electd's own JSON log lines and the recorder's): old child's exit → the old leader's Lease write that hands it over acknowledged (\"handed the Lease over\") %s; → the successor leading (it saw the hand-over in its watch and claimed it with one more write) %s; → electd's \"started\" line (child spawned) %s; → the child's first line %s (negative: the child wrote first).",
			mode, summarize(total).short(), summarize(parts.get("release")).short(), summarize(parts.get("claim")).short(),
			summarize(parts.get("spawn")).short(), summarize(parts.get("init")).short())
	}
	col := newCollector()
	longTrials := max(1, e.cfg.longTrials/3)
	e.tryParallel(ctx,
		tried{"k8s handover client-go release on", func(ctx context.Context) error {
			return e.kubeHandoverGo(ctx, kb, true, e.cfg.trials, e.cfg.groups, col)
		}},
		tried{"k8s handover client-go release off", func(ctx context.Context) error {
			return e.kubeHandoverGo(ctx, kb, false, longTrials, longTrials, col)
		}},
	)
	if g := summarize(col.get("gap true")); g.n > 0 && electdSIGTERM.n > 0 {
		// The target is the issue's: more than 100× faster than client-go's
		// 2.2 s (kubeGoAnchor). The ratio within this run is shown too: its
		// client-go median moves with where in their polling cycle the
		// followers were (0.96–1.82 s over runs of 30 here).
		anchor := float64(kubeGoAnchor) / float64(electdSIGTERM.med)
		inRun := float64(g.med) / float64(electdSIGTERM.med)
		e.rep.add(kubeSec, "electd vs client-go", fig+": client-go's 2.2 s (issue 26) ÷ electd's median (SIGTERM); and within this run, client-go's median (ReleaseOnCancel on) ÷ electd's",
			fmt.Sprintf("%.0f× (%s ÷ %s); in this run %.0f× (%s ÷ %s)", anchor, ms(kubeGoAnchor), ms(electdSIGTERM.med), inRun, ms(g.med), ms(electdSIGTERM.med)), "> 100×", verdict(anchor > 100))
	}
	for _, release := range []bool{true, false} {
		key := fmt.Sprint(release)
		g := summarize(col.get("gap " + key))
		if g.n == 0 {
			continue
		}
		e.rep.add(kubeSec, cgSubject(release, fmt.Sprintf("lease %s", kubeLongTTL)), fig+": SIGTERM to the leader's program: its OnStoppedLeading → the next one's OnStartedLeading", g.String(), "(peer)", "")
		e.rep.note(kubeSec, "1, client-go, ReleaseOnCancel %s: %d trials (%d elections in parallel), each with a fresh follower that started polling 1 s plus a random 0–4.4 s (a random moment of its polling cycle) before the leader got SIGTERM. SIGTERM → the next OnStartedLeading %s; the leader's guarded code (its context done, at once on SIGTERM) → the next OnStartedLeading %s. %s",
			map[bool]string{true: "on", false: "off"}[release], g.n, map[bool]int{true: e.cfg.groups, false: longTrials}[release],
			summarize(col.get("total "+key)).short(), summarize(col.get("ctx "+key)).short(),
			map[bool]string{
				true:  "With the release, the Lease is free at once, but nobody is told: the follower finds it at its next poll, RetryPeriod plus up to 1.2× jitter after its last.",
				false: "Without it, the follower takes the Lease once it has seen it unchanged for LeaseDuration, at its next poll after that.",
			}[release])
	}
	return nil
}

// kubeHandoverElectd runs the handover trials of one mode with two
// copies; it returns the gaps (old child's exit → new child's start), the
// times from the request or signal to the new child's start, and the gaps'
// parts.
func (e *env) kubeHandoverElectd(ctx context.Context, b *backend, mode string) (gaps, total []time.Duration, parts *collector, err error) {
	parts = newCollector()
	c := e.newCluster(b, "k8s-handover-"+mode, kubeLongTTL, nil, nil)
	c.envFor = func(string) []string { return []string{"KUBECONFIG=" + b.kube.direct} }
	defer c.close()
	defer func() { err = c.describeErr(err) }()
	if _, _, err := c.startPair(ctx, 30*time.Second); err != nil {
		return nil, nil, nil, err
	}
	for range e.cfg.trials {
		sleepCtx(ctx, handoverSettle)
		lead, cur, err := c.waitLeading(ctx, 5*time.Second)
		if err != nil {
			return nil, nil, nil, err
		}
		t0 := time.Now()
		if mode == "resign" {
			err = lead.resign()
		} else {
			err = lead.signal(syscall.SIGTERM)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		next, err := c.nextRun(ctx, cur, 30*time.Second)
		if err != nil {
			return nil, nil, nil, err
		}
		old, _ := c.rec.get(cur.Pid)
		if old.Stop.IsZero() {
			return nil, nil, nil, fmt.Errorf("%s: the old child %s has no stop line", mode, &old)
		}
		gap := next.Start.Sub(old.Stop)
		if gap <= 0 {
			e.rep.violation("k8s %s handover: new child %s started %s before the old one %s stopped", mode, &next, ms(-gap), &old)
		}
		gaps = append(gaps, gap)
		total = append(total, next.Start.Sub(t0))
		if mode == "sigterm" && !lead.p.Wait(10*time.Second) {
			return nil, nil, nil, fmt.Errorf("%s did not exit within 10s of SIGTERM", lead.id)
		}
		if succ := c.nodes[next.Node]; succ != nil {
			released := firstAfter(lead.logTimes("handed the Lease over"), old.Stop.Add(-time.Millisecond))
			leading := lastBefore(succ.logTimes("leading"), next.Start)
			// electd's "started" line may come after the child's own
			// first line: the first one after leading.
			spawned := firstAfter(succ.logTimes("started"), leading)
			if !released.IsZero() && !leading.IsZero() && !spawned.IsZero() && leading.After(released) {
				parts.add("release", released.Sub(old.Stop))
				parts.add("claim", leading.Sub(released))
				parts.add("spawn", spawned.Sub(leading))
				parts.add("init", next.Start.Sub(spawned))
			}
		}
		if mode == "sigterm" {
			if code := lead.p.ExitCode(); code != 0 {
				e.rep.note(kubeSec, "electd on k8s exited with %d after SIGTERM (want 0).", code)
			}
			if _, err := c.add(ctx); err != nil {
				return nil, nil, nil, err
			}
		}
		if err := c.waitQueued(ctx, 2, 30*time.Second); err != nil {
			return nil, nil, nil, err
		}
	}
	c.checkOverlaps(e.rep)
	return gaps, total, parts, nil
}

// kubeHandoverGo: trials of client-go's handover in ngroups elections at
// once. In each: a leader; per trial a new follower, then SIGTERM to the
// leader.
func (e *env) kubeHandoverGo(ctx context.Context, kb *kubeEnv, release bool, trials, ngroups int, col *collector) error {
	key := fmt.Sprint(release)
	return trialGroups(trials, ngroups, func(g, n int) error {
		ge := &goElection{kb: kb, name: fmt.Sprintf("cg-handover-%s-%d", map[bool]string{true: "release", false: "norelease"}[release], g),
			lease: kubeLongTTL, release: release}
		defer ge.close()
		lead, err := ge.leader(ctx)
		if err != nil {
			return err
		}
		for range n {
			next, err := ge.follower(ctx)
			if err != nil {
				return err
			}
			// At a random moment of the follower's polling cycle
			// (RetryPeriod plus up to 1.2× jitter: 2–4.4 s).
			_, retry := cgTiming(kubeLongTTL)
			sleepCtx(ctx, time.Second+rand.N(retry*22/10))
			t0 := time.Now()
			if err := lead.term(kubeLongTTL); err != nil {
				return err
			}
			won, err := next.wait(ctx, "started", 2*kubeLongTTL+10*time.Second)
			if err != nil {
				return err
			}
			stopped, ctxDone := lead.at("stopped"), lead.at("ctxdone")
			if stopped.IsZero() || ctxDone.IsZero() {
				return fmt.Errorf("client-go %s: no stopped or ctxdone event after SIGTERM", lead.id)
			}
			col.add("gap "+key, won.Sub(stopped))
			col.add("ctx "+key, won.Sub(ctxDone))
			col.add("total "+key, won.Sub(t0))
			lead = next
		}
		return nil
	})
}

// kubeCrash: 2. kill -9 of the leader → the next leads, at 2 s and at
// 15 s leases (a third as many trials), electd and client-go at once (in
// elections of their own).
func (e *env) kubeCrash(ctx context.Context, kb *kubeEnv, b *backend) error {
	for _, ttl := range []time.Duration{kubeShortTTL, kubeLongTTL} {
		trials, groups := e.cfg.trials, e.cfg.groups
		if ttl == kubeLongTTL {
			trials = max(1, e.cfg.longTrials/3)
			groups = trials
		}
		col := newCollector()
		e.tryParallel(ctx,
			tried{fmt.Sprintf("k8s crash electd %s", ttl), func(ctx context.Context) error {
				return e.kubeCrashElectd(ctx, b, ttl, trials, groups, col)
			}},
			tried{fmt.Sprintf("k8s crash client-go %s", ttl), func(ctx context.Context) error {
				return e.kubeCrashGo(ctx, kb, ttl, trials, groups, col)
			}},
		)
		fig := "2. kill -9 of the leader → the next leads (electd: new child's start; client-go: OnStartedLeading)"
		target := fmt.Sprintf("≤ lease + 10 %% (%s)", ms(ttl*11/10))
		if f := summarize(col.get("electd")); f.n > 0 {
			over := summarize(col.get("electd over bound"))
			e.rep.add(kubeSec, fmt.Sprintf("electd, k8s, --ttl %s", ttl), fig, f.String(), target, verdict(f.max <= ttl*11/10 && over.min >= 0))
			e.rep.note(kubeSec, "2, electd --ttl %s, %d trials (%d elections in parallel): the new child started %s (min) after the last acknowledged renewal + TTL (the earliest a waiter may take over; asserted ≥ 0). From the kill (median / p99): the successor leading %s, its child's first line %s; the killed electd's child was gone after %s (Pdeathsig).",
				ttl, f.n, groups, ms(over.min), summarize(col.get("electd leading")).short(), f.short(), summarize(col.get("electd child gone")).short())
			if v := len(col.get("electd void")); v > 0 {
				e.rep.note(kubeSec, "2, electd --ttl %s: %d more trials void, not timed: the leader's child had stopped before the kill (its term was ending on its own).", ttl, v)
			}
		}
		if f := summarize(col.get("client-go")); f.n > 0 {
			e.rep.add(kubeSec, cgSubject(false, fmt.Sprintf("lease %s", ttl)), fig, f.String(), "(peer)", fmt.Sprintf("%d of %d within lease + 10 %%", countAtMost(col.get("client-go"), ttl*11/10), f.n))
			e.rep.note(kubeSec, "2, client-go lease %s (ReleaseOnCancel does not matter: a killed program releases nothing), %d trials (%d elections in parallel): after the kill, the Lease's last renewTime + lease was %s (median / p99) after it; the follower takes over at its first poll after it has seen the record unchanged for the lease.",
				ttl, f.n, groups, summarize(col.get("client-go lapse")).short())
		}
	}
	return nil
}

func countAtMost(ds []time.Duration, bound time.Duration) int {
	n := 0
	for _, d := range ds {
		if d <= bound {
			n++
		}
	}
	return n
}

// kubeCrashElectd: two copies per election, kill -9 of the leader's
// electd, time until the other's child starts; then a new copy joins.
func (e *env) kubeCrashElectd(ctx context.Context, b *backend, ttl time.Duration, trials, ngroups int, col *collector) error {
	return trialGroups(trials, ngroups, func(g, n int) (err error) {
		c := e.newCluster(b, fmt.Sprintf("k8s-crash-%s-%d", ttl, g), ttl, nil, nil)
		c.envFor = func(string) []string { return []string{"KUBECONFIG=" + b.kube.direct} }
		defer c.close()
		defer func() { err = c.describeErr(err) }()
		return c.runTrials(ctx, n, 3*ttl+20*time.Second, func(lead *node, cur record.Run) error {
			sleepCtx(ctx, kubeSettle())
			lead, cur, vu, err := c.validLeader(ctx, lead, cur, ttl)
			if err != nil {
				return err
			}
			killed, void, err := c.killLeader(ctx, lead, cur, ttl+20*time.Second, func(record.Run, time.Time) {
				col.add("electd void", 0)
			})
			if err != nil || void {
				return err
			}
			if gone, ok := pidwatch.GoneAt(cur.Pid, 2*time.Second, 500*time.Microsecond); ok {
				col.add("electd child gone", gone.Sub(killed))
			} else {
				e.rep.violation("%s: the child %s outlived its electd (kill -9) by 2s", c.election, &cur)
			}
			next, err := c.nextRun(ctx, cur, 2*ttl+20*time.Second)
			if err != nil {
				return err
			}
			bound := vu.Add(-window(ttl)).Add(ttl)
			if next.Start.Before(bound) {
				e.rep.violation("%s on k8s: new child started %s after kill -9, %s BEFORE the last acknowledged renewal + TTL",
					c.election, ms(next.Start.Sub(killed)), ms(bound.Sub(next.Start)))
			}
			col.add("electd", next.Start.Sub(killed))
			col.add("electd over bound", next.Start.Sub(bound))
			if succ := c.nodes[next.Node]; succ != nil {
				if l := lastBefore(succ.logTimes("leading"), next.Start); l.After(killed) {
					col.add("electd leading", l.Sub(killed))
				}
			}
			lead.p.Wait(5 * time.Second)
			if _, err := c.add(ctx); err != nil {
				return err
			}
			return c.waitQueued(ctx, 2, ttl+20*time.Second)
		})
	})
}

// kubeCrashGo: a client-go leader and a follower per election; kill -9
// of the leader, time until the follower's OnStartedLeading; then a new
// follower.
func (e *env) kubeCrashGo(ctx context.Context, kb *kubeEnv, ttl time.Duration, trials, ngroups int, col *collector) error {
	return trialGroups(trials, ngroups, func(g, n int) error {
		ge := &goElection{kb: kb, name: fmt.Sprintf("cg-crash-%s-%d", ttl, g), lease: ttl}
		defer ge.close()
		lead, err := ge.leader(ctx)
		if err != nil {
			return err
		}
		for range n {
			next, err := ge.follower(ctx)
			if err != nil {
				return err
			}
			sleepCtx(ctx, kubeSettle())
			killed := time.Now()
			if err := lead.p.signal(syscall.SIGKILL); err != nil {
				return err
			}
			lead.p.Wait(5 * time.Second)
			last := kb.renewTime(ctx, ge.name)
			won, err := next.wait(ctx, "started", 3*ttl+10*time.Second)
			if err != nil {
				return err
			}
			col.add("client-go", won.Sub(killed))
			if !last.IsZero() {
				col.add("client-go lapse", last.Add(ttl).Sub(killed))
			}
			lead = next
		}
		return nil
	})
}

// kubeCut: 3. a leader cut off from the API server (a fault proxy between
// it and the server, black-holed) while another waits: when its guarded
// code stops against when the other's starts. electd (its child, stopped
// by the term's deadline) and client-go with ReleaseOnCancel on and off
// (its callback's context), at 2 s and at 15 s leases, all at once.
func (e *env) kubeCut(ctx context.Context, kb *kubeEnv, b *backend) error {
	for _, ttl := range []time.Duration{kubeShortTTL, kubeLongTTL} {
		trials := max(1, e.cfg.trials/3)
		groups := max(1, trials/2)
		if ttl == kubeLongTTL {
			trials = max(1, e.cfg.longTrials/6)
			groups = trials
		}
		col := newCollector()
		e.tryParallel(ctx,
			tried{fmt.Sprintf("k8s cut electd %s", ttl), func(ctx context.Context) error {
				return e.kubeCutElectd(ctx, b, ttl, trials, groups, col)
			}},
			tried{fmt.Sprintf("k8s cut client-go release on %s", ttl), func(ctx context.Context) error {
				return e.kubeCutGo(ctx, kb, ttl, true, trials, groups, col)
			}},
			tried{fmt.Sprintf("k8s cut client-go release off %s", ttl), func(ctx context.Context) error {
				return e.kubeCutGo(ctx, kb, ttl, false, trials, groups, col)
			}},
		)
		fig := "3. cut-off leader: its guarded code's stop − the successor's start (negative: stopped before)"
		if d := summarize(col.get("electd")); d.n > 0 {
			e.rep.add(kubeSec, fmt.Sprintf("electd, k8s, --ttl %s", ttl), fig, d.String(), "< 0 (always)", verdict(d.max < 0))
			e.rep.note(kubeSec, "3, electd --ttl %s (default stop-timeout %s), %d cuts: from the cut (median / p99), the old child exited after %s and the successor's child started after %s.",
				ttl, ms(supervisor.DefaultStopTimeout(elector.Timing{TTL: ttl}.WithDefaults())), d.n, summarize(col.get("electd exit")).short(), summarize(col.get("electd next")).short())
		}
		for _, release := range []bool{true, false} {
			key := fmt.Sprint(release)
			d := summarize(col.get("client-go " + key))
			if d.n == 0 {
				continue
			}
			ran := 0
			for _, x := range col.get("client-go " + key) {
				if x >= 0 {
					ran++
				}
			}
			e.rep.add(kubeSec, cgSubject(release, fmt.Sprintf("lease %s", ttl)), fig+" (its callback's context done)", d.String(), "(peer)", fmt.Sprintf("ran on after the successor in %d of %d", ran, d.n))
			e.rep.note(kubeSec, "3, client-go ReleaseOnCancel %s, lease %s, %d cuts: from the cut (median / p99), the leader's callback context was done after %s and its OnStoppedLeading ran after %s; the follower's OnStartedLeading came after %s.",
				map[bool]string{true: "on", false: "off"}[release], ttl, d.n, summarize(col.get("client-go ctx "+key)).short(), summarize(col.get("client-go stopped "+key)).short(), summarize(col.get("client-go next "+key)).short())
		}
	}
	e.rep.note(kubeSec, "3: each cut-off leader reaches the API server through a fault proxy of its own (internal/faultproxy), black-holed 200–500 ms after the follower was ready (electd: queued; client-go: polling); the follower reaches it directly. client-go stops the guarded code's context when a renewal has not succeeded within RenewDeadline; with ReleaseOnCancel it first tries to release the Lease, which a cut-off leader cannot, for up to RenewDeadline more, and only then cancels the context (Run's deferred cancel comes after renew returns). Guarded code that ignores its context runs on until the process exits (most controllers exit in OnStoppedLeading, which runs after that).")
	return nil
}

// kubeCutElectd: two copies per election, each through a proxy of its
// own; the leader's proxy is cut; the old child's end against the new
// child's start; then the proxy heals and the old leader rejoins.
func (e *env) kubeCutElectd(ctx context.Context, b *backend, ttl time.Duration, trials, ngroups int, col *collector) error {
	return trialGroups(trials, ngroups, func(g, n int) (err error) {
		c := e.newCluster(b, fmt.Sprintf("k8s-cut-%s-%d", ttl, g), ttl, nil, nil)
		pxs := map[string]*faultproxy.Proxy{}
		cfgs := map[string]string{}
		defer func() {
			c.close()
			for _, p := range pxs {
				_ = p.Close()
			}
		}()
		defer func() { err = c.describeErr(err) }()
		for _, id := range []string{"n1", "n2"} {
			px, cfg, err := b.kube.viaProxy()
			if err != nil {
				return err
			}
			pxs[id], cfgs[id] = px, cfg
		}
		c.envFor = func(id string) []string { return []string{"KUBECONFIG=" + cfgs[id]} }
		return c.runTrials(ctx, n, 3*ttl+20*time.Second, e.cutTrial(ctx, c, pxs, "k8s", ttl, col))
	})
}

// cutTrial is one trial of a cut-off leader (kubeCutElectd, zkCutElectd):
// the leader's proxy (pxs, by node id) is cut; the old child's end is set
// against the new child's start (a violation, on store, unless it came
// first); then the proxy heals and the old leader rejoins as a follower.
func (e *env) cutTrial(ctx context.Context, c *cluster, pxs map[string]*faultproxy.Proxy, store string, ttl time.Duration, col *collector) func(lead *node, cur record.Run) error {
	return func(lead *node, cur record.Run) error {
		sleepCtx(ctx, kubeSettle())
		px := pxs[lead.id]
		cut := time.Now()
		px.Cut()
		end, _, err := c.waitEnd(ctx, cur.Pid, 2*ttl+5*time.Second)
		if err != nil {
			return err
		}
		next, err := c.nextRun(ctx, cur, 2*ttl+20*time.Second)
		if err != nil {
			return err
		}
		gap := end.Sub(next.Start)
		if gap >= 0 {
			e.rep.violation("%s on %s: the cut-off leader's child ran until %s after the successor's child started", c.election, store, ms(gap))
		}
		col.add("electd", gap)
		col.add("electd exit", end.Sub(cut))
		col.add("electd next", next.Start.Sub(cut))
		px.Heal()
		if err := c.waitQueued(ctx, 2, 2*ttl+20*time.Second); err != nil {
			return err
		}
		return waitUntil(ctx, 20*time.Second, func() bool {
			d, _, err := lead.leader()
			return err == nil && d.Leader != nil && !d.Self.Leader
		})
	}
}

// kubeCutGo: per trial a new election, a leader through a proxy and a
// follower; the proxy is cut; when the leader's callback context is done
// against when the follower's OnStartedLeading ran.
func (e *env) kubeCutGo(ctx context.Context, kb *kubeEnv, ttl time.Duration, release bool, trials, ngroups int, col *collector) error {
	key := fmt.Sprint(release)
	var seq atomic.Int64
	renew, retry := cgTiming(ttl)
	return trialGroups(trials, ngroups, func(g, n int) error {
		for range n {
			name := fmt.Sprintf("cg-cut-%s-%s-%d", ttl, map[bool]string{true: "release", false: "norelease"}[release], seq.Add(1))
			err := func() error {
				px, cfg, err := kb.viaProxy()
				if err != nil {
					return err
				}
				defer px.Close()
				lead, err := kb.startGo(name, "a", ttl, release, cfg)
				if err != nil {
					return err
				}
				defer lead.kill()
				if _, err := lead.wait(ctx, "started", 2*ttl+10*time.Second); err != nil {
					return err
				}
				next, err := kb.startGo(name, "b", ttl, release, "")
				if err != nil {
					return err
				}
				defer next.kill()
				if _, err := next.wait(ctx, "acquiring", 10*time.Second); err != nil {
					return err
				}
				sleepCtx(ctx, kubeSettle())
				cut := time.Now()
				px.Cut()
				won, err := next.wait(ctx, "started", 3*ttl+10*time.Second)
				if err != nil {
					return err
				}
				done, err := lead.wait(ctx, "ctxdone", 2*renew+retry+ttl+10*time.Second)
				if err != nil {
					return err
				}
				stopped, _ := lead.wait(ctx, "stopped", 10*time.Second)
				col.add("client-go "+key, done.Sub(won))
				col.add("client-go ctx "+key, done.Sub(cut))
				if !stopped.IsZero() {
					col.add("client-go stopped "+key, stopped.Sub(cut))
				}
				col.add("client-go next "+key, won.Sub(cut))
				return nil
			}()
			if err != nil {
				return err
			}
		}
		return nil
	})
}
